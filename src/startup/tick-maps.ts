// process.nextTick's tick object, `{ [async_id_symbol]: …, [trigger_async_id_symbol]: …, callback, args }`, is
// built inline by V8 only while that literal's feedback stays monomorphic: one map per property, recorded when
// the feedback is allocated (a daemon's ~15th nextTick call, during its start-up). Those maps are held only
// weakly (by the feedback and the transition tree) and by the live tick objects. A full collection that finds
// no tick object alive frees them — the daemon's start-up collection (./heap.ts, collectStartGarbage) always
// did, and a memory-reducing collection of an idle daemon can — and the next tick object gets new maps, which
// V8's rule for literal feedback turns MEGAMORPHIC for the life of the process: every nextTick call then defines
// its properties through the runtime, ~0.5 µs each, ~9 µs per tunnel and per plain-HTTP request (17 calls).
// Keeping one tick object alive for good keeps its maps (a map holds its parents) and so the feedback
// monomorphic. The figures are in docs/benchmarks.md, "process.nextTick's maps".
import { createHook } from 'node:async_hooks';

let kept: object | undefined;

/**
 * Keeps one tick object of process.nextTick alive for the life of the process (idempotent). Call it early in
 * the daemon's start, before its first full collection. Returns the tick object (for tests).
 */
export function keepTickObjectMaps(): object | undefined {
  if (kept !== undefined) return kept;
  // The init hook is given the tick object itself; the hook is enabled for this one call only.
  const hook = createHook({
    init(_id, type, _trigger, resource) {
      if (type === 'TickObject') kept = resource as object;
    },
  }).enable();
  try {
    process.nextTick(noop);
  } finally {
    hook.disable();
  }
  return kept;
}

function noop(): void {}
