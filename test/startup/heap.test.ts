// The daemon's heap growth setting (src/startup/heap.ts): set unless node was started with one. Its effect
// (2 mark-compacts per 2 GiB relayed instead of 20-27) is a benchmark figure, in docs/benchmarks.md "M3".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { collectStartGarbage, tuneHeapGrowth, tuneScavenges } from '../../src/startup/heap.ts';

test('a --heap-growing-percent given to node wins over the daemon’s own', () => {
  assert.equal(tuneHeapGrowth(['--heap-growing-percent=50']), false);
  assert.equal(tuneHeapGrowth(['--heap_growing_percent=50']), false);
});

test('without one the daemon sets its own', () => {
  assert.equal(tuneHeapGrowth(['--max-semi-space-size=4']), true);
});

test('the start-up garbage is collected at once when asked (the daemon asks once, after its start-up work)', () => {
  // Old-generation garbage: objects that lived through scavenges, then dropped, as a start's reads leave them.
  let garbage: { i: number; s: string }[] | null = Array.from({ length: 400_000 }, (_, i) => ({ i, s: `start-garbage-${i}` }));
  const held = garbage.length;
  garbage = null;
  const r = collectStartGarbage();
  assert.equal(held, 400_000);
  assert.ok(r.ms >= 0);
  assert.ok(r.before - r.after > 16 * 1024 * 1024, `heap used ${r.before} -> ${r.after}: the dropped objects were collected`);
  assert.ok(Math.abs(process.memoryUsage().heapUsed - r.after) < 8 * 1024 * 1024);
});

test('scavenges run on the main thread alone unless node was told otherwise', () => {
  assert.equal(tuneScavenges(['--parallel-scavenge']), false);
  assert.equal(tuneScavenges(['--no-parallel-scavenge']), false);
  assert.equal(tuneScavenges(['--no_parallel_scavenge']), false);
  assert.equal(tuneScavenges(['--max-semi-space-size=4']), true);
});
