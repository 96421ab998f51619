// Redis going away mid-run: every shared operation fails fast with a typed StoreError (never hangs), the
// outage is logged once, the allowance keeps serving on its offline share, and everything works again —
// spending made offline reconciled into `used` — once redis-server is back on the same port.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { AllowanceLeaser } from '../../src/fleet/allowance.ts';
import { RedisAllowance } from '../../src/store/redis-fleet-allowance.ts';
import { Leases } from '../../src/store/redis-fleet-leases.ts';
import { SharedSessions } from '../../src/store/redis-fleet-sessions.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';
import { openRedisStore, RedisConnection, StoreError } from '../../src/store/index.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { redisMissing, RedisServer } from './redis-server.ts';
import { poll } from '../support/wait.ts';

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves how long `op` took to reject with STORE_UNAVAILABLE; fails if it resolves or another error. */
async function failsFast(what: string, op: () => Promise<unknown>): Promise<number> {
  const t0 = Date.now();
  await assert.rejects(op(), (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNAVAILABLE', what);
  return Date.now() - t0;
}

describe('Redis outage', { skip: redisMissing }, () => {
  test('fails fast with typed errors while down, logs once, recovers and reconciles when back', async () => {
    const lines: { level: number; msg: string }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as { level: number; msg: string });
        done();
      },
    });
    const logger = createLogger({ level: 'info', destination: sink });
    const fast = { commandTimeoutMs: 500, maxReconnectDelayMs: 100, logger };
    const store = await openRedisStore(server.url, { prefix: 'o:', ...fast });
    const fleet = new RedisConnection(server.url, { name: 'rotor-fleet', ...fast });
    await fleet.connect();
    const leases = new Leases(fleet, { owner: 'A', ttlMs: 5000, prefix: 'o:' });
    const sessions = new SharedSessions<UpstreamNode>(fleet, { prefix: 'o:' });
    const leaser = new AllowanceLeaser(new RedisAllowance(fleet, 'o:'), {
      instance: 'A',
      sliceBytes: 10_000,
      offlineBytes: 5000,
      outageMaxBytes: 100_000,
      logger,
    });
    await store.setLimit('alice', 1_000_000);
    leaser.user('alice').seedLimit = 1_000_000; // what the accounting layer keeps (its last view of the limit)
    assert.equal(await leaser.acquire('alice'), 10_000);
    assert.equal(await leases.acquire('order:1'), true);

    // Traffic in flight while Redis dies.
    const inflight = Promise.allSettled(Array.from({ length: 50 }, (_, i) => store.kvSet(`k${i}`, i)));
    await server.kill();
    await inflight;

    const took = [
      await failsFast('kvGet', () => store.kvGet('k1')),
      await failsFast('recordCallback', () => store.recordCallback({ type: 'order', no: 'P1', op: '1' }, 1)),
      await failsFast('addUsage', () => store.addUsage([{ user: 'alice', bytes: 1 }])),
      await failsFast('listOrders', () => store.listOrders()),
      await failsFast('lease acquire', () => leases.acquire('order:2')),
      await failsFast('session get', () => sessions.get('alice', 's1')),
    ];
    assert.ok(Math.max(...took) < 1000, `slowest failure took ${Math.max(...took)} ms`);

    // The allowance keeps serving: the lease it held, then its share of what alice had left (990 000 B, one
    // daemon), cut to outageMaxBytes, then stop.
    const a = leaser.user('alice');
    // Spending the lease asks for a refill; until it is done the user may overdraw by lowWater.
    assert.equal(a.spend(10_000), true);
    assert.ok(a.queued || a.syncing !== undefined, 'the spend asked for a refill');
    const t0 = Date.now();
    assert.equal(await leaser.acquire('alice'), 100_000);
    assert.ok(Date.now() - t0 < 1000);
    assert.equal(a.offline, true);
    a.spend(100_000);
    assert.equal(await leaser.acquire('alice'), 0, 'one share per outage');

    // A socket can refuse writes a moment before its close event is handled: give the log that moment.
    const errors = () => lines.filter((l) => l.level >= 50 && /redis is unreachable/.test(l.msg));
    await poll(() => errors().length >= 2, { what: 'an error line for each connection', timeoutMs: 500, everyMs: 10 }).catch(
      () => undefined,
    );
    await sleep(50); // a negative window: no third line follows
    assert.equal(errors().length, 2, 'one error line per connection, not per call');

    // Back on the same port (empty: no persistence); the connections come back by themselves.
    await server.start();
    await poll(async () => (await store.kvSet('back', true), true), {
      what: 'the store to take writes again',
      timeoutMs: 5000,
      everyMs: 50,
      ignoreErrors: true,
    });
    assert.equal(await store.kvGet('back'), true);
    await poll(() => fleet.ready, { what: 'the fleet to be ready again', timeoutMs: 5000, everyMs: 20 });
    assert.equal(await leases.acquire('order:2'), true);
    assert.equal(
      (await sessions.claim('alice', 's1', { id: 'n1', protocol: 'http', host: '127.0.0.1', port: 1, source: 'pwd' }, 1000)).won,
      true,
    );
    // Reconcile: the 110 000 bytes relayed (100 000 of them while offline) land in `used` at the next sync,
    // Redis having come back empty: the usage record is rebuilt from the leaser's last view (limit, 0 used) plus them.
    await leaser.syncAll();
    assert.deepEqual(await store.getUsage('alice').then((u) => [u?.usedBytes, u?.limitBytes]), [110_000, 1_000_000]);
    assert.equal(a.offline, false);
    assert.equal(await leaser.acquire('alice'), 10_000);
    assert.ok(lines.some((l) => l.level === 30 && /redis is reachable again/.test(l.msg)));

    await leaser.close();
    await fleet.close();
    await store.close();
  });
});
