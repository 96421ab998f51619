// The folders of src/ in the order docs/architecture.md declares ("The dependency rule"): a folder imports only
// folders on lines below its own, never above and never beside. The order is read from the document, so the
// map and the code cannot drift apart; every folder of src/ must be placed in it.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { relative, resolve, sep } from 'node:path';
import { describe, test } from 'node:test';
// @ts-expect-error: a plain .mjs script without declarations
import { importGraph } from '../../scripts/import-graph.mjs';
import { declaredLevels } from './declared-order.ts';

const SRC = resolve('src');

/** The folder a file of src/ belongs to (a top-level file is its own). */
const folderOf = (file: string): string => relative(SRC, file).split(sep)[0]!;

describe('folder order', () => {
  const levels = declaredLevels();
  const level = new Map<string, number>();
  levels.forEach((names, i) => names.forEach((n) => level.set(n, i)));

  test('every folder and top-level file of src/ is placed in the declared order', () => {
    const present = readdirSync(SRC).filter((n) => !n.endsWith('.d.ts'));
    assert.deepEqual(
      present.filter((n) => !level.has(n)),
      [],
    );
    assert.deepEqual(
      [...level.keys()].filter((n) => !present.includes(n)),
      [],
      'the order names folders src/ does not have',
    );
  });

  test('no import climbs the order or crosses to a folder beside it', () => {
    const graph = (importGraph as (root: string) => Map<string, string[]>)(SRC);
    const climbs: string[] = [];
    for (const [file, targets] of graph) {
      const from = folderOf(file);
      for (const target of targets) {
        const to = folderOf(target);
        if (from === to) continue;
        if (!((level.get(to) ?? -1) > (level.get(from) ?? Infinity))) climbs.push(`${relative(SRC, file)} → ${relative(SRC, target)}`);
      }
    }
    assert.ok(graph.size > 100, 'the import graph of src/ was not read');
    assert.deepEqual(climbs, []);
  });
});
