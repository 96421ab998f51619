// The daemon's heap growth setting (src/startup/heap.ts): set unless node was started with one. Its effect
// (2 mark-compacts per 2 GiB relayed instead of 20-27) is a benchmark figure, in docs/benchmarks.md "M3".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getHeapSpaceStatistics } from 'node:v8';
import { collectStartGarbage, tuneHeapGrowth } from '../../src/startup/heap.ts';

test('a --heap-growing-percent given to node wins over the daemon’s own', () => {
  assert.equal(tuneHeapGrowth(['--heap-growing-percent=50']), false);
  assert.equal(tuneHeapGrowth(['--heap_growing_percent=50']), false);
});

test('without one the daemon sets its own', () => {
  assert.equal(tuneHeapGrowth(['--max-semi-space-size=4']), true);
});

test('the start-up garbage is collected at once when asked, and the old space compacted (the daemon asks after its start-up work)', () => {
  // Old-generation garbage with survivors spread over every page, as a start's reads leave it: 1 object in 8 kept.
  let garbage: { i: number; s: string }[] | null = Array.from({ length: 800_000 }, (_, i) => ({ i, s: `start-garbage-${i}` }));
  const kept = garbage.filter((_, i) => i % 8 === 0);
  garbage = null;
  const r = collectStartGarbage();
  assert.equal(kept.length, 100_000);
  assert.ok(r.ms >= 0);
  assert.ok(r.before - r.after > 32 * 1024 * 1024, `heap used ${r.before} -> ${r.after}: the dropped objects were collected`);
  const old = getHeapSpaceStatistics().find((s) => s.space_name === 'old_space')!;
  const slack = old.space_size - old.space_used_size;
  assert.ok(
    slack < 24 * 1024 * 1024,
    `old space: ${old.space_size} committed for ${old.space_used_size} used: the survivors were compacted`,
  );
});
