import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { Pool, type PoolOptions } from '../../src/pool/pool.ts';
import { PoolRegistry } from '../../src/pool/registry.ts';
import { StaticPool } from '../../src/pool/static.ts';
import type { Drawer } from '../../src/pool/drawer.ts';
import { PoolEmptyError, type UpstreamNode } from '../../src/pool/types.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { socksNode } from '../support/nodes.ts';

let serial = 0;
const node = socksNode;
const fresh = (n: number, expiresAt?: number) => Array.from({ length: n }, () => node(20000 + ++serial, expiresAt));

/** A drawer whose answers the test queues; records each call. A draw with nothing queued waits for `push`. */
class ScriptedDrawer implements Drawer {
  calls: number[] = [];
  private queue: (UpstreamNode[] | Error)[] = [];
  private pending: ((v: UpstreamNode[] | Error) => void)[] = [];
  push(answer: UpstreamNode[] | Error): void {
    const p = this.pending.shift();
    if (p) p(answer);
    else this.queue.push(answer);
  }
  async draw(count: number): Promise<UpstreamNode[]> {
    this.calls.push(count);
    const a = this.queue.shift() ?? (await new Promise<UpstreamNode[] | Error>((resolve) => this.pending.push(resolve)));
    if (a instanceof Error) throw a;
    return a;
  }
}

const key = { user: 'alice', productNo: 'P1', region: '' };
function clock(start = 1_000_000) {
  const c = { t: start, now: () => c.t };
  return c;
}
function makePool(drawer: Drawer, extra: Partial<PoolOptions> = {}) {
  return new Pool({ key, drawer, lowWater: 0, ...extra });
}
async function primed(nodes: UpstreamNode[], extra: Partial<PoolOptions> = {}) {
  const d = new ScriptedDrawer();
  d.push(nodes);
  const pool = makePool(d, extra);
  await pool.prefill();
  return { pool, drawer: d };
}
const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('strategies', () => {
  test('round robin visits every node in turn', async () => {
    const nodes = fresh(3);
    const { pool } = await primed(nodes);
    const got: string[] = [];
    for (let i = 0; i < 6; i++) got.push((await pool.acquire()).id);
    assert.deepEqual(
      got,
      [...nodes, ...nodes].map((n) => n.id),
    );
  });

  test('least connections prefers the node with fewest open connections', async () => {
    const nodes = fresh(3);
    const { pool } = await primed(nodes, { strategy: 'least_connections' });
    const a = await pool.acquire();
    const b = await pool.acquire();
    const c = await pool.acquire();
    assert.equal(new Set([a.id, b.id, c.id]).size, 3, 'idle nodes spread');
    pool.release(b);
    assert.equal((await pool.acquire()).id, b.id);
    pool.release(a);
    pool.release(a); // extra releases never go below zero
    assert.equal((await pool.acquire()).id, a.id);
    const snap = pool.snapshot();
    assert.deepEqual(
      snap.nodes.map((n) => n.activeConnections),
      [1, 1, 1],
    );
  });

  test('random uses the injected random source', async () => {
    const nodes = fresh(4);
    const rolls = [0.99, 0, 0.5, 0.26];
    const { pool } = await primed(nodes, { strategy: 'random', random: () => rolls.shift()! });
    const got = [];
    for (let i = 0; i < 4; i++) got.push((await pool.acquire()).id);
    assert.deepEqual(got, [nodes[3]!.id, nodes[0]!.id, nodes[2]!.id, nodes[1]!.id]);
  });

  test('exclude skips nodes (retry on another node)', async () => {
    const nodes = fresh(2);
    const { pool } = await primed(nodes);
    for (let i = 0; i < 3; i++) assert.equal((await pool.acquire(new Set([nodes[0]!.id]))).id, nodes[1]!.id);
  });
});

describe('fail marking and cooling', () => {
  test('maxFails within the window → cooling; back after coolDown', async () => {
    const c = clock();
    const nodes = fresh(2);
    const metrics = createMetrics({ defaultMetrics: false });
    const { pool } = await primed(nodes, { now: c.now, maxFails: 2, failWindowMs: 10_000, coolDownMs: 30_000, metrics });
    const [a, b] = nodes as [UpstreamNode, UpstreamNode];
    pool.reportFailure(a, 'refused');
    assert.ok(pool.isUsable(a), 'one failure is not enough');
    c.t += 11_000; // outside the window: the first failure no longer counts
    pool.reportFailure(a, 'refused');
    assert.ok(pool.isUsable(a));
    c.t += 1_000;
    pool.reportFailure(a, 'connect_timeout');
    assert.ok(!pool.isUsable(a), 'two failures within the window cool it');
    assert.equal(pool.stateOf(a), 'cooling');
    assert.equal(pool.stateOf(node(1)), 'gone');
    assert.equal((await metrics.poolProxies.get()).values.find((v) => v.labels.state === 'cooling')?.value, 1);
    for (let i = 0; i < 3; i++) assert.equal((await pool.acquire()).id, b.id);
    assert.equal(pool.snapshot().nodes.find((n) => n.id === a.id)?.state, 'cooling');
    c.t += 30_001;
    assert.ok(pool.isUsable(a));
    const seen = new Set([(await pool.acquire()).id, (await pool.acquire()).id]);
    assert.ok(seen.has(a.id), 'cooled node serves again');
    pool.snapshot();
    assert.equal((await metrics.poolProxies.get()).values.find((v) => v.labels.state === 'ready')?.value, 2);
  });

  test('target_refused does not count against the node; auth cools at once; success clears', async () => {
    const c = clock();
    const [a] = fresh(1) as [UpstreamNode];
    const { pool } = await primed([a], { now: c.now, maxFails: 2 });
    pool.reportFailure(a, 'target_refused');
    pool.reportFailure(a, 'target_refused');
    pool.reportFailure(a, 'target_refused');
    assert.ok(pool.isUsable(a));
    pool.reportFailure(a, 'reset');
    pool.reportSuccess(a);
    pool.reportFailure(a, 'reset');
    assert.ok(pool.isUsable(a), 'success reset the count');
    pool.reportFailure(a, 'auth');
    assert.ok(!pool.isUsable(a));
    pool.reportSuccess(a);
    assert.ok(pool.isUsable(a), 'a success through a cooling node brings it back');
  });

  test('last resort: with none ready, the least recently failed cooling node', async () => {
    const c = clock();
    const nodes = fresh(3);
    const d = new ScriptedDrawer();
    d.push(nodes);
    const pool = new Pool({ key, drawer: d, now: c.now, maxFails: 1, lowWater: 1 });
    await pool.prefill();
    const [a, b, x] = nodes as [UpstreamNode, UpstreamNode, UpstreamNode];
    pool.reportFailure(b, 'refused');
    c.t += 10;
    pool.reportFailure(a, 'refused');
    c.t += 10;
    pool.reportFailure(x, 'refused');
    assert.equal((await pool.acquire()).id, b.id, 'b failed first');
    assert.equal((await pool.acquire(new Set([b.id]))).id, a.id);
    // Meanwhile the pool, below low water, drew in the background.
    assert.equal(d.calls.length, 2);
    pool.close();
  });

  test('unknown nodes are ignored by report/release/isUsable', async () => {
    const { pool } = await primed(fresh(1));
    const stranger = node(1);
    pool.reportFailure(stranger, 'refused');
    pool.reportSuccess(stranger);
    pool.release(stranger);
    assert.equal(pool.isUsable(stranger), false);
  });
});

describe('expiry', () => {
  test('expired nodes are dropped and never handed out', async () => {
    const c = clock();
    const short = fresh(1, c.t + 1_000);
    const long = fresh(1, c.t + 60_000);
    const { pool } = await primed([...short, ...long], { now: c.now });
    assert.ok(pool.isUsable(short[0]!));
    assert.equal(pool.stateOf(short[0]!), 'ready');
    c.t += 1_000;
    assert.ok(!pool.isUsable(short[0]!));
    assert.equal(pool.stateOf(short[0]!), 'expired');
    for (let i = 0; i < 3; i++) assert.equal((await pool.acquire()).id, long[0]!.id);
    assert.deepEqual(
      pool.snapshot().nodes.map((n) => n.id),
      [long[0]!.id],
    );
  });
});

describe('drawing', () => {
  test('low-water refill runs in the background and does not block a servable acquire', async () => {
    const nodes = fresh(1);
    const d = new ScriptedDrawer();
    d.push(nodes);
    const pool = new Pool({ key, drawer: d, lowWater: 3, drawBatch: 4 });
    await pool.prefill();
    // The refill draw will hang until pushed; acquires must still be served at once.
    const first = await pool.acquire();
    const second = await pool.acquire();
    assert.equal(first.id, nodes[0]!.id);
    assert.equal(second.id, nodes[0]!.id);
    assert.deepEqual(d.calls, [4, 4], 'one refill started, shared by both acquires');
    assert.equal(pool.snapshot().drawing, true);
    const more = fresh(3);
    d.push(more);
    await flush();
    assert.equal(pool.snapshot().ready, 4);
    assert.equal(pool.snapshot().drawing, false);
    pool.close();
  });

  test('concurrent acquires on an empty pool share one draw', async () => {
    const d = new ScriptedDrawer();
    const pool = makePool(d);
    const waiting = Array.from({ length: 10 }, () => pool.acquire());
    await flush();
    assert.equal(d.calls.length, 1);
    const nodes = fresh(5);
    d.push(nodes);
    const got = await Promise.all(waiting);
    assert.equal(d.calls.length, 1);
    assert.equal(new Set(got.map((n) => n.id)).size, 5, 'round robin spread the waiters');
  });

  test('bounded wait: a hanging draw → PoolEmptyError within acquireTimeoutMs', async () => {
    const d = new ScriptedDrawer();
    const pool = makePool(d, { acquireTimeoutMs: 100 });
    const started = Date.now();
    await assert.rejects(
      pool.acquire(),
      (err: unknown) =>
        err instanceof PoolEmptyError && err.code === 'POOL_EMPTY' && err.pool === 'alice/P1/' && /within 100 ms/.test(err.message),
    );
    assert.ok(Date.now() - started < 1_000);
    // The late draw still fills the pool for the next acquire.
    const nodes = fresh(1);
    d.push(nodes);
    await flush();
    assert.equal((await pool.acquire()).id, nodes[0]!.id);
    assert.equal(d.calls.length, 1);
  });

  test('everything excluded → a draw for new nodes', async () => {
    const first = fresh(1);
    const { pool, drawer } = await primed(first);
    const next = fresh(1);
    drawer.push(next);
    assert.equal((await pool.acquire(new Set([first[0]!.id]))).id, next[0]!.id);
  });

  test('a failed draw rejects the waiters with the cause, then backs off exponentially; logged once', async () => {
    const c = clock();
    const lines: string[] = [];
    const logger = createLogger({
      level: 'info',
      destination: new Writable({
        write(chunk, _e, cb) {
          lines.push(String(chunk));
          cb();
        },
      }),
    });
    const d = new ScriptedDrawer();
    const pool = makePool(d, { now: c.now, logger, backoffBaseMs: 1_000, backoffMaxMs: 4_000, lowWater: 1 });
    const boom = Object.assign(new Error('platform error 10072: insufficient balance'), { code: 'PLATFORM_ERROR' });
    d.push(boom);
    await assert.rejects(
      pool.acquire(),
      (err: unknown) =>
        err instanceof PoolEmptyError && /PLATFORM_ERROR/.test(err.message) && (err as Error & { cause?: unknown }).cause === boom,
    );
    // Within the backoff: rejected at once, no new draw.
    await assert.rejects(pool.acquire(), (err: unknown) => err instanceof PoolEmptyError && /next draw in 1000 ms/.test(err.message));
    assert.equal(d.calls.length, 1);
    const snap = pool.snapshot();
    assert.equal(snap.drawError?.consecutive, 1);
    assert.equal(snap.drawError?.code, 'PLATFORM_ERROR');
    // Delays double: 1 s, 2 s, 4 s, capped at 4 s.
    const delays: number[] = [];
    for (let i = 0; i < 3; i++) {
      c.t = pool.snapshot().drawError!.retryAt;
      d.push(boom);
      await assert.rejects(pool.acquire());
      delays.push(pool.snapshot().drawError!.retryAt - c.t);
    }
    assert.deepEqual(delays, [2_000, 4_000, 4_000]);
    assert.equal(lines.filter((l) => l.includes('pool draw failed')).length, 1, 'logged once, not per failure');
    c.t = pool.snapshot().drawError!.retryAt;
    const nodes = fresh(2);
    d.push(nodes);
    assert.equal((await pool.acquire()).id, nodes[0]!.id);
    assert.equal(pool.snapshot().drawError, undefined);
    assert.equal(lines.filter((l) => l.includes('pool draws recovered')).length, 1);
    assert.ok(!lines.join('').includes('"password"'));
  });

  test('an empty draw counts as a failed draw (no tight refill loop)', async () => {
    const d = new ScriptedDrawer();
    const pool = makePool(d, { acquireTimeoutMs: 1_000 });
    d.push([]);
    await assert.rejects(pool.acquire(), (err: unknown) => err instanceof PoolEmptyError && /no node/.test(err.message));
    await assert.rejects(pool.acquire(), (err: unknown) => err instanceof PoolEmptyError && /next draw/.test(err.message));
    assert.equal(d.calls.length, 1);
  });

  test('maxNodes: fresh nodes replace cooling ones first', async () => {
    const c = clock();
    const old = fresh(3);
    const { pool, drawer } = await primed(old, { now: c.now, maxNodes: 3, maxFails: 1 });
    pool.reportFailure(old[1]!, 'refused');
    const next = fresh(1);
    drawer.push(next);
    await pool.prefill();
    assert.deepEqual(
      pool
        .snapshot()
        .nodes.map((n) => n.id)
        .sort(),
      [old[0]!.id, old[2]!.id, next[0]!.id].sort(),
    );
  });

  test('a re-drawn node keeps its history and gets the new credentials', async () => {
    const c = clock();
    const a = node(30001, c.t + 1000);
    const { pool, drawer } = await primed([a], { now: c.now });
    pool.reportFailure(a, 'reset');
    drawer.push([{ ...a, password: 'new', expiresAt: c.t + 9000 }]);
    await pool.prefill();
    const s = pool.snapshot();
    assert.equal(s.nodes.length, 1);
    assert.equal(s.nodes[0]!.fails, 1);
    assert.equal(s.nodes[0]!.expiresAt, c.t + 9000);
    assert.equal((await pool.acquire()).password, 'new');
    assert.ok(!JSON.stringify(s).includes('new'), 'snapshot carries no password');
  });

  test('close rejects waiters and refuses further acquires', async () => {
    const d = new ScriptedDrawer();
    const metrics = createMetrics({ defaultMetrics: false });
    const pool = makePool(d, { metrics });
    const waiting = pool.acquire();
    await flush();
    pool.close();
    await assert.rejects(waiting, (err: unknown) => err instanceof PoolEmptyError && /closed/.test(err.message));
    await assert.rejects(pool.acquire(), PoolEmptyError);
    assert.equal((await metrics.poolProxies.get()).values.length, 0);
  });
});

describe('PoolRegistry', () => {
  test('creates one pool per key lazily, lists and closes them', async () => {
    const made: string[] = [];
    const reg = new PoolRegistry({
      drawerFor: (k) => {
        made.push(`${k.user}/${k.region}`);
        return { draw: async () => [node(k.region === 'USA' ? 40001 : 40002)] };
      },
      tuning: { lowWater: 0 },
    });
    const a = reg.get({ user: 'alice', productNo: 'P', region: 'USA' });
    assert.equal(reg.get({ user: 'alice', productNo: 'P', region: 'USA' }), a);
    const b = reg.get({ user: 'alice', productNo: 'P', region: '' });
    assert.notEqual(a, b);
    assert.deepEqual(made, ['alice/USA', 'alice/']);
    assert.equal((await a.acquire()).port, 40001);
    assert.equal(reg.find('alice/P/USA'), a);
    assert.deepEqual(
      reg.snapshot().map((s) => [s.id, s.ready]),
      [
        ['alice/P/USA', 1],
        ['alice/P/', 0],
      ],
    );
    assert.equal(reg.delete({ user: 'alice', productNo: 'P', region: '' }), true);
    assert.equal(reg.list().length, 1);
    reg.close();
    await assert.rejects(a.acquire(), PoolEmptyError);
    assert.throws(() => reg.get(key), PoolEmptyError);
  });
});

describe("PoolRegistry: a user's last pool", () => {
  test('is given again for its own key only, keeps its use time, and never once closed', async () => {
    let now = 1_000;
    const reg = new PoolRegistry({
      drawerFor: () => ({ draw: async () => [node(40030)] }),
      tuning: { lowWater: 0 },
      idleEvictMs: 60_000,
      now: () => now,
    });
    try {
      const a = reg.get({ user: 'alice', productNo: 'P', region: 'USA' });
      assert.equal(reg.get({ user: 'alice', productNo: 'P', region: 'USA' }), a);
      const b = reg.get({ user: 'alice', productNo: 'P', region: '' });
      assert.notEqual(b, a);
      assert.equal(reg.get({ user: 'alice', productNo: 'Q', region: 'USA' }).id, 'alice/Q/USA');
      assert.equal(reg.get({ user: 'bob', productNo: 'P', region: 'USA' }).id, 'bob/P/USA');
      assert.equal(reg.get({ user: 'alice', productNo: 'P', region: 'USA' }), a);
      assert.equal(reg.get({ user: 'alice', productNo: 'P', region: '' }), b);
      // Asked again (as the user's last pool) just before its idle time: it was used, so it stays.
      now += 59_999;
      assert.equal(reg.get({ user: 'alice', productNo: 'P', region: '' }), b);
      now += 2;
      assert.equal(reg.evictIdle(), 3);
      assert.equal(reg.find('alice/P/'), b);
      // Removed while it was the user's last: the next ask makes a new pool, which serves.
      assert.equal(reg.delete({ user: 'alice', productNo: 'P', region: '' }), true);
      const b2 = reg.get({ user: 'alice', productNo: 'P', region: '' });
      assert.notEqual(b2, b);
      const n2 = await b2.acquire();
      assert.equal(n2.port, 40030);
      b2.release(n2);
      // Evicted while it was the user's last: the same.
      now += 60_001;
      reg.evictIdle();
      const b3 = reg.get({ user: 'alice', productNo: 'P', region: '' });
      assert.notEqual(b3, b2);
      assert.equal((await b3.acquire()).port, 40030);
    } finally {
      reg.close();
    }
  });
});

describe('PoolRegistry bounds (issue 13: regions chosen by the client)', () => {
  test('at most maxPerUser pools per user: the least recently used idle one makes room; none idle = refused', async () => {
    let now = 1_000;
    const metrics = createMetrics({ defaultMetrics: false });
    const reg = new PoolRegistry({
      drawerFor: () => ({ draw: async () => [node(40010)] }),
      tuning: { lowWater: 0 },
      maxPerUser: 3,
      // Replacements unrationed here (one a millisecond of this clock): test/pool/registry-churn.test.ts rations them.
      replacePerMinute: 60_000,
      now: () => now,
      metrics,
    });
    try {
      const pools = ['R0', 'R1', 'R2'].map((region) => {
        now += 10;
        return reg.get({ user: 'alice', productNo: 'P', region });
      });
      const held = await pools[1]!.acquire(); // R1 in use
      now += 10;
      reg.get({ user: 'alice', productNo: 'P', region: 'R0' }); // R0 used again: R2 is now the oldest idle
      now += 10;
      reg.get({ user: 'alice', productNo: 'P', region: 'R3' });
      assert.deepEqual(
        reg
          .list()
          .map((p) => p.key.region)
          .sort(),
        ['R0', 'R1', 'R3'],
      );
      assert.equal(reg.find('alice/P/R2'), undefined);
      // Another user's pools are not counted against alice.
      reg.get({ user: 'bob', productNo: 'P', region: 'R9' });
      // 300 more regions: the pool count stays at the bound, and so do the metric series.
      for (let i = 0; i < 300; i++) {
        now += 1;
        reg.get({ user: 'alice', productNo: 'P', region: `X${i}` });
      }
      assert.equal(reg.list().filter((p) => p.key.user === 'alice').length, 3);
      const series = (await metrics.registry.getSingleMetric('rotor_pool_proxies')!.get()).values.length;
      assert.ok(series <= 2 * 4, `${series} pool series`);
      // All of alice's pools in use: a new region is refused rather than evicting a busy pool.
      const busy = await Promise.all(
        reg
          .list()
          .filter((p) => p.key.user === 'alice' && p !== pools[1])
          .map((p) => p.acquire()),
      );
      assert.equal(busy.length, 2);
      assert.throws(() => reg.get({ user: 'alice', productNo: 'P', region: 'NEW' }), PoolEmptyError);
      pools[1]!.release(held);
    } finally {
      reg.close();
    }
  });

  test('a pool unused for idleEvictMs with nothing in use is closed; a busy one stays', async () => {
    let now = 1_000;
    const reg = new PoolRegistry({
      drawerFor: () => ({ draw: async () => [node(40020)] }),
      tuning: { lowWater: 0 },
      idleEvictMs: 60_000,
      now: () => now,
    });
    try {
      const idle = reg.get({ user: 'alice', productNo: 'P', region: 'A' });
      const used = reg.get({ user: 'alice', productNo: 'P', region: 'B' });
      const n = await used.acquire();
      await idle.acquire().then((x) => idle.release(x));
      now += 59_999;
      assert.equal(reg.evictIdle(), 0);
      now += 2;
      assert.equal(reg.evictIdle(), 1);
      assert.equal(reg.find('alice/P/A'), undefined);
      assert.equal(reg.find('alice/P/B'), used);
      used.release(n);
      assert.equal(reg.evictIdle(), 1);
      assert.equal(reg.list().length, 0);
      await assert.rejects(idle.acquire(), PoolEmptyError);
    } finally {
      reg.close();
    }
  });
});

describe('StaticPool', () => {
  test('always the one node unless excluded; setNode swaps it', async () => {
    const n = node(50001);
    const s = new StaticPool('instance/I1', n);
    assert.equal(await s.acquire(), n);
    s.reportFailure(n, 'refused');
    assert.equal(await s.acquire(), n, 'no other node to prefer');
    assert.equal(s.snapshot().consecutiveFailures, 1);
    assert.equal(s.snapshot().activeConnections, 2);
    s.release(n);
    await assert.rejects(s.acquire(new Set([n.id])), PoolEmptyError);
    const m = node(50002);
    s.setNode(m);
    assert.equal(s.isUsable(n), false);
    assert.equal(s.isUsable(m), true);
    assert.equal((await s.acquire(new Set([n.id]))).id, m.id);
  });
});

describe('a draw that brings only nodes already held (a backconnect gateway)', () => {
  /** A drawer that answers the same line on every call, as a backconnect gateway's DrawByPwd does. */
  class GatewayDrawer implements Drawer {
    calls = 0;
    constructor(private readonly line: () => UpstreamNode) {}
    async draw(): Promise<UpstreamNode[]> {
      this.calls++;
      return [this.line()];
    }
  }

  test('is not repeated per connection during the quiet; then once, when it ends', async () => {
    const c = clock();
    const d = new GatewayDrawer(() => node(30001));
    const pool = new Pool({ key, drawer: d, lowWater: 2, redrawAfterMs: 60_000, now: c.now });
    await pool.prefill();
    for (let i = 0; i < 1000; i++) {
      const n = await pool.acquire();
      pool.release(n);
      if (i % 100 === 0) await flush();
    }
    await flush();
    // The first draw brings the line; the second (below low water) answers it again: from then on, quiet.
    assert.equal(d.calls, 2);
    assert.ok((pool.snapshot().quietUntil ?? 0) > c.t);
    c.t += 60_001;
    pool.release(await pool.acquire());
    await flush();
    assert.equal(d.calls, 3, 'one refill once the quiet ended');
    pool.release(await pool.acquire());
    await flush();
    assert.equal(d.calls, 3, 'and quiet again after it');
  });

  test('a node near its expiry ends the quiet: its successor is drawn before it expires', async () => {
    const c = clock();
    const d = new GatewayDrawer(() => node(30002, c.t + 300_000));
    const pool = new Pool({ key, drawer: d, lowWater: 2, redrawAfterMs: 600_000, expiryLeadMs: 30_000, now: c.now });
    await pool.prefill();
    pool.release(await pool.acquire());
    await flush();
    assert.equal(d.calls, 2);
    c.t += 271_000; // 29 s before the expiry
    pool.release(await pool.acquire());
    await flush();
    assert.equal(d.calls, 3);
    const snap = pool.snapshot();
    assert.equal(snap.nodes.length, 1);
    assert.equal(snap.nodes[0]!.expiresAt, c.t + 300_000, 'the redrawn line carries the new expiry');
  });

  test('a retry that excludes every held node is refused without a draw', async () => {
    const c = clock();
    const d = new GatewayDrawer(() => node(30003));
    const pool = new Pool({ key, drawer: d, lowWater: 2, now: c.now });
    await pool.prefill();
    const n = await pool.acquire();
    await flush();
    assert.equal(d.calls, 2);
    await assert.rejects(pool.acquire(new Set([n.id])), PoolEmptyError);
    assert.equal(d.calls, 2);
  });

  test('distinct lines per draw keep the pool drawing to its low-water mark', async () => {
    const d = new ScriptedDrawer();
    d.push(fresh(1));
    const pool = makePool(d, { lowWater: 3 });
    await pool.prefill();
    pool.release(await pool.acquire());
    await flush();
    assert.equal(d.calls.length, 2, 'below low water after a draw of new nodes: drawn again');
    d.push(fresh(2));
    await flush();
    assert.equal(pool.snapshot().ready, 3);
    assert.equal(pool.snapshot().quietUntil, undefined);
  });
});
