// Nothing outside src/store knows which driver is in use: no module imports a driver file (sqlite*.ts,
// redis*.ts), calls the driver choosers (isRedisUrl, sharedConnection, …), names a driver class or writes a
// redis:// URL; and every component takes the narrow backend it uses (OrderStore, UserStore, … from
// src/store/types.ts, or a part of Backends), never the drivers' whole `Store`. Read with TypeScript's parser,
// so comments never count.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { describe, test } from 'node:test';
import ts from 'typescript';
// @ts-expect-error: a plain .mjs script without declarations
import { listFiles } from '../../scripts/files.mjs';

const SRC = resolve('src');

/** Names only src/store may use: the driver choosers and the drivers themselves. */
const DRIVER_NAMES = new Set([
  'isRedisUrl',
  'sharedConnection',
  'sharedFleetState',
  'openStore',
  'openStoreFor',
  'openRedisStore',
  'SqliteStore',
  'RedisStore',
  'RedisConnection',
  'RedisKeys',
]);
const DRIVER_FILE = /^(sqlite|redis)[^/]*\.ts$/;

/** Every breach of the store's seam in the .ts files under `root` (its `store` folder excepted), as "file: what". */
function seamBreaches(root: string): string[] {
  const storeDir = join(root, 'store') + sep;
  const files = (listFiles(root, (name: string) => name.endsWith('.ts') && !name.endsWith('.d.ts')) as string[]).filter(
    (f) => !f.startsWith(storeDir),
  );
  const found: string[] = [];
  for (const file of files) {
    const where = relative(root, file);
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const intoStore = (spec: ts.Expression): string | undefined => {
      if (!ts.isStringLiteralLike(spec) || !spec.text.startsWith('.')) return undefined;
      const target = resolve(dirname(file), spec.text);
      return target.startsWith(storeDir) ? target : undefined;
    };
    const visit = (node: ts.Node): void => {
      // import … from / export … from / import('…') of a store module
      const spec =
        (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier
          ? node.moduleSpecifier
          : ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword
            ? node.arguments[0]
            : undefined;
      // import('…').Name in a type position
      const typeSpec =
        ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)
          ? node.argument.literal
          : undefined;
      const typeTarget = typeSpec ? intoStore(typeSpec) : undefined;
      if (typeTarget !== undefined && DRIVER_FILE.test(basename(typeTarget))) found.push(`${where}: imports store/${basename(typeTarget)}`);
      if (
        typeTarget !== undefined &&
        ts.isImportTypeNode(node) &&
        node.qualifier &&
        ts.isIdentifier(node.qualifier) &&
        node.qualifier.text === 'Store'
      )
        found.push(`${where}: takes the whole Store`);
      const target = spec ? intoStore(spec) : undefined;
      if (target !== undefined && DRIVER_FILE.test(basename(target))) found.push(`${where}: imports store/${basename(target)}`);
      if (target !== undefined && ts.isImportDeclaration(node)) {
        const bindings = node.importClause?.namedBindings;
        if (bindings && ts.isNamedImports(bindings))
          for (const el of bindings.elements)
            if ((el.propertyName ?? el.name).text === 'Store') found.push(`${where}: takes the whole Store`);
      }
      if (ts.isIdentifier(node) && DRIVER_NAMES.has(node.text)) found.push(`${where}: ${node.text}`);
      if (ts.isStringLiteralLike(node) && /rediss?:\/\//i.test(node.text)) found.push(`${where}: a redis:// URL`);
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return [...new Set(found)].sort();
}

describe("the store's seam", () => {
  test('no module outside src/store knows the driver or takes the whole Store', () => {
    assert.deepEqual(seamBreaches(SRC), []);
  });

  test('the check finds a driver import, a chooser, a driver name, a URL and the whole Store', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotor-store-seam-'));
    try {
      mkdirSync(join(dir, 'store'));
      mkdirSync(join(dir, 'a'));
      writeFileSync(join(dir, 'store', 'types.ts'), 'export interface Store {}\nexport interface UserStore {}\n');
      writeFileSync(join(dir, 'store', 'redis-keys.ts'), 'export const k = 1;\n');
      writeFileSync(
        join(dir, 'store', 'open.ts'),
        "import { k } from './redis-keys.ts';\nexport const isRedisUrl = (p: string) => k > 0 && p !== '';\n",
      );
      writeFileSync(
        join(dir, 'a', 'one.ts'),
        [
          "import type { UserStore } from '../store/types.ts';",
          "import type { Store as Whole } from '../store/types.ts';",
          "import { isRedisUrl } from '../store/open.ts';",
          '// isRedisUrl in a comment does not count, nor redis://in a comment',
          "export const one = (s: UserStore, w: Whole) => isRedisUrl('redis://127.0.0.1:1') && s && w;",
          "export const two = () => import('../store/redis-keys.ts');",
          '',
        ].join('\n'),
      );
      writeFileSync(
        join(dir, 'a', 'two.ts'),
        "export type W = import('../store/types.ts').Store;\nexport type K = typeof import('../store/redis-keys.ts');\n",
      );
      writeFileSync(
        join(dir, 'a', 'clean.ts'),
        "import type { UserStore } from '../store/types.ts';\nexport const c = (s: UserStore) => s;\n",
      );
      assert.deepEqual(seamBreaches(dir), [
        'a/one.ts: a redis:// URL',
        'a/one.ts: imports store/redis-keys.ts',
        'a/one.ts: isRedisUrl',
        'a/one.ts: takes the whole Store',
        'a/two.ts: imports store/redis-keys.ts',
        'a/two.ts: takes the whole Store',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
