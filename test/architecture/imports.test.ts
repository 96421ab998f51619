// The import graph of src/ has no cycle (scripts/import-graph.mjs reads it with TypeScript's pre-processor).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
// @ts-expect-error: a plain .mjs script without declarations
import { cycles, importGraph } from '../../scripts/import-graph.mjs';

type Graph = Map<string, string[]>;
const find = (root: string): string[][] => (cycles as (g: Graph) => string[][])((importGraph as (r: string) => Graph)(root));

describe('import graph', () => {
  test('src/ has no import cycle', () => {
    const found = find('src').map((c) => c.map((f) => relative(process.cwd(), f)).join(' ↔ '));
    assert.deepEqual(found, []);
  });

  test('the check finds a cycle, type-only imports included, and ignores imports in comments', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotor-imports-'));
    try {
      mkdirSync(join(dir, 'a'));
      writeFileSync(join(dir, 'a', 'one.ts'), "import { two } from './two.ts';\nexport const one = two + 1;\n");
      writeFileSync(join(dir, 'a', 'two.ts'), "import type { Three } from '../three.ts';\nexport const two = 2 as Three;\n");
      writeFileSync(join(dir, 'three.ts'), "import type { one } from './a/one.ts';\nexport type Three = typeof one;\n");
      writeFileSync(join(dir, 'four.ts'), "// import { one } from './a/one.ts';\nexport const s = \"import './four.ts'\";\n");
      const found = find(dir);
      assert.equal(found.length, 1);
      assert.deepEqual(
        found[0]!.map((f) => relative(dir, f)),
        ['a/one.ts', 'a/two.ts', 'three.ts'],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
