// The health prober's timer is armed for the next moment there is work, not every tick: an idle daemon
// whose nodes are healthy wakes for it once per lookMs. A node that goes cooling is still probed at its
// cool-down's end (not later than with a tick every 250 ms), and returns to service when the probe passes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Pool } from '../../src/pool/pool.ts';
import type { Drawer } from '../../src/pool/drawer.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';
import { Prober, type ProberTimer } from '../../src/health/prober.ts';
import type { ProbeResult } from '../../src/health/probe.ts';
import { socksNode } from '../support/nodes.ts';

const node = (port: number): UpstreamNode => socksNode(port);

/** A timer the test fires by hand: at most one armed at a time (the prober's). */
class HandTimer implements ProberTimer {
  armed: { fn: () => void; ms: number } | undefined;
  sets = 0;
  set(fn: () => void, ms: number): unknown {
    this.sets++;
    this.armed = { fn, ms };
    return this.armed;
  }
  clear(handle: unknown): void {
    if (handle === this.armed) this.armed = undefined;
  }
  fire(): void {
    const a = this.armed;
    assert.ok(a, 'a timer is armed');
    this.armed = undefined;
    a.fn();
  }
}

async function setup(o: { coolDownMs: number; lookMs: number; idleIntervalMs?: number }) {
  const clock = { t: 1_000_000 };
  const now = () => clock.t;
  const nodes = [node(20001), node(20002)];
  const drawer: Drawer = { draw: async () => nodes };
  const pool = new Pool({
    key: { user: 'alice', productNo: 'P1', region: '' },
    drawer,
    lowWater: 0,
    probation: true,
    maxFails: 1,
    coolDownMs: o.coolDownMs,
    now,
  });
  await pool.prefill();
  const probes: Array<{ node: UpstreamNode; at: number; settle: (r: ProbeResult) => void }> = [];
  const timer = new HandTimer();
  const prober = new Prober({
    pools: () => [pool],
    probe: (n) => new Promise<ProbeResult>((settle) => probes.push({ node: n, at: clock.t, settle })),
    idleIntervalMs: o.idleIntervalMs ?? 0,
    lookMs: o.lookMs,
    timer,
    now,
  });
  return { clock, pool, nodes, probes, timer, prober };
}

test('with no node cooling and no idle probes, the prober sleeps lookMs, not 250 ms', async () => {
  const { clock, timer, prober, probes } = await setup({ coolDownMs: 30_000, lookMs: 30_000 });
  prober.start();
  assert.equal(timer.armed?.ms, 30_000);
  for (let i = 0; i < 3; i++) {
    clock.t += timer.armed!.ms;
    timer.fire();
    assert.equal(timer.armed?.ms, 30_000, `pass ${i + 1}`);
  }
  // Four passes in 90 s (250 ms ticks would have made 360); no probe, as nothing asked for one.
  assert.equal(timer.sets, 4);
  assert.equal(probes.length, 0);
  prober.stop();
  assert.equal(timer.armed, undefined);
});

test('a node that went cooling between passes is probed at its cool-down end, and returns when it passes', async () => {
  const { clock, pool, nodes, probes, timer, prober } = await setup({ coolDownMs: 10_000, lookMs: 10_000 });
  prober.start();
  assert.equal(timer.armed?.ms, 10_000);
  // 4 s into the sleep the node fails (maxFails 1): cooling until t + 10 s, due 14 s after the last pass.
  clock.t += 4_000;
  pool.reportFailure(nodes[0]!, 'refused');
  const due = clock.t + 10_000;
  assert.equal(pool.nextProbeAt(), due);
  assert.equal(pool.isUsable(nodes[0]!), false);
  // The sleeping pass comes first (6 s later), sees the cooling node and arms for its due moment exactly.
  clock.t += 6_000;
  timer.fire();
  assert.equal(probes.length, 0, 'not probed before its cool-down ran out');
  assert.equal(clock.t + timer.armed!.ms, due);
  clock.t = due;
  timer.fire();
  assert.equal(probes.length, 1);
  assert.equal(probes[0]!.node, nodes[0]);
  assert.equal(probes[0]!.at, due, 'probed at its cool-down end');
  assert.equal(pool.nextProbeAt(), undefined, 'none waits while the probe runs');
  probes[0]!.settle({ ok: true, latencyMs: 3 });
  await new Promise((r) => setImmediate(r));
  assert.equal(pool.isUsable(nodes[0]!), true, 'back in service after the passing probe');
  assert.equal(timer.armed?.ms, 10_000, 'asleep again');
  prober.stop();
});

test('a failed probe cools the node again: the next probe comes a cool-down later', async () => {
  const { clock, pool, nodes, probes, timer, prober } = await setup({ coolDownMs: 5_000, lookMs: 5_000 });
  pool.reportFailure(nodes[1]!, 'refused');
  prober.start();
  clock.t += timer.armed!.ms;
  timer.fire();
  assert.equal(probes.length, 1);
  probes[0]!.settle({ ok: false, latencyMs: 0, reason: 'refused', message: 'refused' });
  await new Promise((r) => setImmediate(r));
  assert.equal(pool.isUsable(nodes[1]!), false);
  assert.equal(pool.nextProbeAt(), clock.t + 5_000);
  assert.equal(clock.t + timer.armed!.ms, clock.t + 5_000);
  clock.t += 5_000;
  timer.fire();
  assert.equal(probes.length, 2);
  prober.stop();
});

test('idle probes: one per pool per interval, the timer armed for the next one', async () => {
  const { clock, probes, timer, prober } = await setup({ coolDownMs: 30_000, lookMs: 30_000, idleIntervalMs: 20_000 });
  prober.start();
  clock.t += timer.armed!.ms;
  timer.fire();
  assert.equal(probes.length, 1, 'the first idle probe at the first pass');
  probes[0]!.settle({ ok: true, latencyMs: 1 });
  await new Promise((r) => setImmediate(r));
  assert.equal(timer.armed?.ms, 20_000);
  clock.t += 20_000;
  timer.fire();
  assert.equal(probes.length, 2);
  prober.stop();
});

test('a pool that cannot say when its next probe is due is looked at every tick', async () => {
  const timer = new HandTimer();
  const prober = new Prober({
    pools: () => [
      { id: 'p', probeDue: () => [], idleCandidate: () => undefined, probeStarted() {}, recordProbe() {}, probeAbandoned() {} },
    ],
    probe: async () => ({ ok: true, latencyMs: 0 }),
    idleIntervalMs: 0,
    lookMs: 30_000,
    timer,
    // A clock of the test's own: with the real one a loaded machine lets a millisecond pass inside the pass (249).
    now: () => 1_000_000,
  });
  prober.start();
  timer.fire();
  assert.equal(timer.armed?.ms, 250);
  timer.fire();
  assert.equal(timer.armed?.ms, 250);
  prober.stop();
});
