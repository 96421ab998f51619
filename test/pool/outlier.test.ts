// Outlier ejection in a real Pool (src/pool/outlier.ts through pool.ts's hook), on an injected clock: five
// failures in a row eject a node, each ejection lasts longer, the failure share ejects too, and never more
// than the configured share of a pool is ejected at once.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Drawer } from '../../src/pool/drawer.ts';
import { OutlierDetector, newOutlierState } from '../../src/pool/outlier.ts';
import { Pool, type PoolOptions } from '../../src/pool/pool.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';

let serial = 0;
function nodes(n: number): UpstreamNode[] {
  return Array.from({ length: n }, () => {
    const port = 30000 + ++serial;
    return { id: `socks5://u@127.0.0.1:${port}`, protocol: 'socks5' as const, host: '127.0.0.1', port, source: 'pwd' as const };
  });
}

class OnceDrawer implements Drawer {
  constructor(private readonly list: UpstreamNode[]) {}
  async draw(): Promise<UpstreamNode[]> {
    return this.list;
  }
}

async function pool(list: UpstreamNode[], t: { now: number }, extra: Partial<PoolOptions> = {}): Promise<Pool> {
  // maxFails high: the short-term cooling stays out of the way, so what is measured is ejection alone.
  const p = new Pool({
    key: { user: 'alice', productNo: 'P', region: '' },
    drawer: new OnceDrawer(list),
    lowWater: 0,
    maxFails: 1000,
    now: () => t.now,
    ...extra,
  });
  await p.prefill();
  return p;
}

describe('outlier ejection', () => {
  test('a node failing 5 times in a row is ejected; the next ejection lasts twice as long; success in between resets the run', async () => {
    const t = { now: 1_000_000 };
    const [bad, good] = nodes(2);
    const p = await pool([bad!, good!], t, {
      outlier: { consecutiveFailures: 5, baseEjectionMs: 30_000, maxEjectionMs: 300_000, maxEjectedPercent: 50 },
    });
    for (let i = 0; i < 4; i++) p.reportFailure(bad!, 'refused');
    p.reportSuccess(bad!);
    for (let i = 0; i < 4; i++) p.reportFailure(bad!, 'refused');
    assert.equal(p.isUsable(bad!), true, 'four failures after a success: still in service');
    p.reportFailure(bad!, 'refused');
    assert.equal(p.isUsable(bad!), false, 'the fifth failure in a row ejects it');
    const snap = p.snapshot().nodes.find((n) => n.id === bad!.id)!;
    assert.equal(snap.ejectedUntil, t.now + 30_000);
    assert.equal(snap.ejections, 1);
    // While ejected it is not handed out when another node is ready.
    for (let i = 0; i < 4; i++) assert.equal((await p.acquire()).id, good!.id);
    // The target refusing says nothing about the node: never counted.
    t.now += 30_001;
    assert.equal(p.isUsable(bad!), true, 'back after its ejection');
    for (let i = 0; i < 10; i++) p.reportFailure(bad!, 'target_refused');
    assert.equal(p.isUsable(bad!), true);
    for (let i = 0; i < 5; i++) p.reportFailure(bad!, 'reset');
    const again = p.snapshot().nodes.find((n) => n.id === bad!.id)!;
    assert.equal(again.ejections, 2);
    assert.equal(again.ejectedUntil, t.now + 60_000, 'the second ejection is two base times');
  });

  test('never more than the configured share of a pool is ejected at once (at least one node)', async () => {
    const t = { now: 2_000_000 };
    const list = nodes(10);
    const p = await pool(list, t, { outlier: { consecutiveFailures: 5, maxEjectedPercent: 20 } });
    for (const n of list) for (let i = 0; i < 5; i++) p.reportFailure(n, 'refused');
    const out = list.filter((n) => !p.isUsable(n));
    assert.equal(out.length, 2, '20% of 10 nodes');
    // Once those two are back, two others may go.
    t.now += 30_001;
    assert.equal(list.filter((n) => !p.isUsable(n)).length, 0);
    for (const n of list.slice(5)) for (let i = 0; i < 5; i++) p.reportFailure(n, 'refused');
    assert.equal(list.filter((n) => !p.isUsable(n)).length, 2);

    const small = nodes(3);
    const q = await pool(small, t, { outlier: { consecutiveFailures: 5, maxEjectedPercent: 10 } });
    for (const n of small) for (let i = 0; i < 5; i++) q.reportFailure(n, 'refused');
    assert.equal(small.filter((n) => !q.isUsable(n)).length, 1, '10% of 3 rounds to one node, as Envoy');
  });

  test('a failure share over the window ejects a node that never fails five times in a row', async () => {
    const t = { now: 3_000_000 };
    const [flaky, other] = nodes(2);
    const p = await pool([flaky!, other!], t, {
      outlier: { consecutiveFailures: 5, failurePercent: 75, minRequests: 20, intervalMs: 60_000, maxEjectedPercent: 50 },
    });
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < 4; i++) {
        assert.equal(p.isUsable(flaky!), true, `round ${round}`);
        p.reportFailure(flaky!, 'handshake');
        t.now += 100;
      }
      p.reportSuccess(flaky!);
    }
    // 16 failures and 4 successes: never five in a row; the next failure makes 17 of 21 (81%).
    assert.equal(p.isUsable(flaky!), true);
    p.reportFailure(flaky!, 'handshake');
    assert.equal(p.isUsable(flaky!), false);
  });

  test('off without settings, and with maxEjectedPercent 0', async () => {
    const t = { now: 4_000_000 };
    const [a, b] = nodes(2);
    const p = await pool([a!, b!], t);
    for (let i = 0; i < 20; i++) p.reportFailure(a!, 'refused');
    assert.equal(p.isUsable(a!), true);
    const d = new OutlierDetector({ maxEjectedPercent: 0 });
    assert.equal(d.mayEject(10, 0), false);
    const s = newOutlierState();
    for (let i = 0; i < 4; i++) assert.equal(d.failure(s, 0), undefined);
    assert.equal(d.failure(s, 0), 'consecutive');
  });

  test('the multiplier starts over after a node stays in service for maxEjectionMs', () => {
    const d = new OutlierDetector({ baseEjectionMs: 10, maxEjectionMs: 100 });
    const s = newOutlierState();
    assert.equal(d.eject(s, 0), 10);
    assert.equal(d.eject(s, 20), 40);
    assert.equal(d.eject(s, 60), 90);
    assert.equal(d.eject(s, 1000), 1010, 'back to one base time');
    for (let i = 0; i < 20; i++) d.eject(s, 2000);
    assert.equal(s.ejectedUntil, 2100, 'capped at maxEjectionMs');
  });
});
