// process.nextTick's tick object, `{ [async_id_symbol]: …, [trigger_async_id_symbol]: …, callback, args }`, is
// built inline by V8 only while that literal's feedback stays monomorphic: one map per property, recorded when
// the feedback is allocated (a daemon's ~15th nextTick call, during its start-up). Those maps are held only
// weakly (by the feedback and the transition tree) and by the live objects that have them. A full collection
// that finds no tick object alive frees them — the daemon's start-up collection (./heap.ts, collectStartGarbage)
// always did, and a memory-reducing collection of an idle daemon can — and the next tick object gets new maps,
// which V8's rule for literal feedback turns MEGAMORPHIC for the life of the process: every nextTick call then
// defines its properties in V8's runtime, ~0.5 µs each, ~9 µs per tunnel and per plain-HTTP request (17 calls).
// One object of the same shape, kept for good, keeps those maps (a map holds its parents) and so the feedback
// monomorphic. It is built here, not taken from nextTick through an async_hooks init hook: enabling a hook even
// once installs V8 promise hooks, which turns off V8's fast paths for await and promises for the life of the
// process. The figures are in docs/benchmarks.md, "process.nextTick's maps".
import { AsyncResource } from 'node:async_hooks';

let kept: object | undefined;

/**
 * Keeps an object with the maps of process.nextTick's tick object alive for the life of the process
 * (idempotent). Call it early in the daemon's start, before its first full collection. Returns that object
 * (for tests), undefined when this node's async resources do not carry the symbols it needs.
 */
export function keepTickObjectMaps(): object | undefined {
  if (kept !== undefined) return kept;
  // An async resource carries the two symbols (node's own, not reachable otherwise) under these descriptions.
  const symbols = Object.getOwnPropertySymbols(new AsyncResource('RotorTickMaps', { requireManualDestroy: true }));
  const asyncId = symbols.find((s) => s.description === 'async_id_symbol');
  const triggerId = symbols.find((s) => s.description === 'trigger_async_id_symbol');
  if (asyncId === undefined || triggerId === undefined) return undefined;
  // The same literal as node's (lib/internal/process/task_queues.js), property for property, so the same maps.
  // The ids are doubles: node's are read from a Float64Array and its fields hold doubles; a small integer here
  // could make this object's fields narrower than node's, and node's next tick object would move to new maps.
  kept = { [asyncId]: 0.5, [triggerId]: 0.5, callback: noop, args: undefined };
  return kept;
}

function noop(): void {}
