// The adaptive hedge delay (src/proxy/handshake-times.ts) answers without sorting while the quantile is at or
// below the floor; its answer must stay the sorted quantile's in every case, the ring wrapping included.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { HedgeDelays } from '../../src/proxy/handshake-times.ts';

/** The delay by its definition: the quantile of the last `window` samples, times the multiplier, clamped. */
function reference(samples: number[], o: { multiplier: number; quantile: number; floorMs: number; capMs: number; window: number }): number {
  const recent = samples.slice(-Math.max(4, o.window)).sort((a, b) => a - b);
  const q = recent[Math.min(recent.length - 1, Math.floor(o.quantile * recent.length))]!;
  return Math.round(Math.min(o.capMs, Math.max(o.floorMs, q * o.multiplier)));
}

/** A small deterministic generator (no Math.random: a failure must be reproducible). */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

describe('HandshakeTimes.hedgeDelayMs', () => {
  test('equals the sorted quantile for samples on both sides of the floor, across the ring wrapping', () => {
    const cases = [
      { multiplier: 3, quantile: 0.9, floorMs: 150, capMs: 2000, window: 64 },
      { multiplier: 3, quantile: 0.5, floorMs: 150, capMs: 2000, window: 8 },
      { multiplier: 2, quantile: 1, floorMs: 40, capMs: 100, window: 5 },
      { multiplier: 3, quantile: 0, floorMs: 150, capMs: 120, window: 16 },
    ];
    for (const [n, o] of cases.entries()) {
      const next = lcg(n + 1);
      const times = new HedgeDelays({ ...o, initialMs: 777 }).for({});
      const samples: number[] = [];
      assert.equal(times.hedgeDelayMs(), 777, 'no sample yet: the initial delay');
      for (let i = 0; i < 600; i++) {
        // Phases: all fast, a mix around the floor's multiple (floorMs / multiplier), all slow, fast again.
        const phase = Math.floor(i / 150);
        const edge = o.floorMs / o.multiplier;
        const ms = phase === 0 || phase === 3 ? next() * edge * 0.5 : phase === 1 ? edge * (0.5 + next()) : edge * (1 + 5 * next());
        // Exactly at the floor's multiple now and then (the boundary belongs to the floor).
        const sample = i % 37 === 0 ? edge : ms;
        times.record(sample);
        samples.push(sample);
        assert.equal(times.hedgeDelayMs(), reference(samples, o), `case ${n}, after ${i + 1} samples`);
      }
    }
  });

  test('ignores what is not a time', () => {
    const times = new HedgeDelays({ initialMs: 500 }).for({});
    times.record(Number.NaN);
    times.record(-1);
    assert.equal(times.hedgeDelayMs(), 500);
    times.record(1);
    assert.equal(times.hedgeDelayMs(), 150);
  });
});
