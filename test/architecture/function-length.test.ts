// No function in src/ is longer than MAX_LINES, counted from its first line to its closing brace, closures
// included: a function that outgrows it holds more than one job. Read with the TypeScript parser, so arrow
// functions, methods and object-literal functions are all counted.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';
// @ts-expect-error: a plain .mjs script without declarations
import { listFiles } from '../../scripts/files.mjs';

const MAX_LINES = 120;
const SRC = resolve('src');

/** Every function-like node with a body in `file` longer than `max` lines, as "path:line name (n lines)". */
function longFunctions(file: string, max: number): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      const name = node.name !== undefined ? node.name.getText(source) : '(anonymous)';
      if (lines > max) found.push(`${relative(SRC, file)}:${first + 1} ${name} (${lines} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

test(`no function in src/ is longer than ${MAX_LINES} lines`, () => {
  const files = (listFiles(SRC, (name: string) => name.endsWith('.ts')) as string[]).filter((f) => !f.endsWith('.d.ts'));
  assert.ok(files.length > 100, `only ${files.length} files found under src/`);
  assert.deepEqual(
    files.flatMap((f) => longFunctions(f, MAX_LINES)),
    [],
  );
});

test('the check finds a long function', () => {
  const body = Array.from({ length: MAX_LINES }, (_, i) => `  const v${i} = ${i};`).join('\n');
  const dir = mkdtempSync(join(tmpdir(), 'rotor-function-length-'));
  const file = join(dir, 'long.ts');
  writeFileSync(file, `export function tooLong() {\n${body}\n}\nexport const short = () => 1;\n`);
  try {
    assert.equal(longFunctions(file, MAX_LINES).length, 1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
