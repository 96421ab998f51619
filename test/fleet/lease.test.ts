// Generic leases against a real redis-server: one holder at a time, owner-checked renew and release,
// takeover after the holder dies (its lease expires), the keeper noticing a lost lease.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { LeaseKeeper } from '../../src/fleet/lease.ts';
import { Leases } from '../../src/store/redis-fleet-leases.ts';
import { redisMissing, RedisServer, connection } from './redis-server.ts';
import { poll } from '../support/wait.ts';

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

describe('Leases', { skip: redisMissing }, () => {
  test('one holder; renew and release only by the owner; free after release', async () => {
    const ca = await connection(server.url, 'a');
    const cb = await connection(server.url, 'b');
    const a = new Leases(ca, { owner: 'A', ttlMs: 5000, prefix: 'l1:' });
    const b = new Leases(cb, { owner: 'B', ttlMs: 5000, prefix: 'l1:' });
    const raced = await Promise.all([a.acquire('order:PO1'), b.acquire('order:PO1'), a.acquire('order:PO1'), b.acquire('order:PO1')]);
    const holder = await a.holder('order:PO1');
    assert.ok(holder === 'A' || holder === 'B');
    // Re-acquiring our own lease is true; the other's is false.
    assert.deepEqual(raced, holder === 'A' ? [true, false, true, false] : [false, true, false, true]);
    const [mine, theirs] = holder === 'A' ? [a, b] : [b, a];
    assert.equal(await theirs.renew('order:PO1'), false);
    assert.equal(await theirs.release('order:PO1'), false);
    assert.equal(await mine.holder('order:PO1'), holder);
    assert.equal(await mine.renew('order:PO1'), true);
    assert.equal(await mine.release('order:PO1'), true);
    assert.equal(await theirs.acquire('order:PO1'), true);
    assert.equal(await mine.holder('order:PO1'), theirs.owner);
    await ca.close();
    await cb.close();
  });

  test('the holder dies: its lease expires, another takes over, the old holder finds it lost', async () => {
    const ca = await connection(server.url, 'a');
    const cb = await connection(server.url, 'b');
    const key = 'l2:lease:order:PO2';
    // Redis keeps the clock of a lease (PX): rather than wait for it, the test moves a lease's remaining time
    // with PEXPIRE and reads it back with PTTL.
    const ttlLeft = (): Promise<number> => ca.client.pttl(key);
    const lost: string[] = [];
    const a = new LeaseKeeper(new Leases(ca, { owner: 'A', ttlMs: 5000, prefix: 'l2:' }), {
      onLost: (n) => lost.push(n),
      renewEveryMs: 60_000,
    });
    // B renews often against a long TTL, so a loaded machine's late timer cannot let its lease run out.
    const b = new LeaseKeeper(new Leases(cb, { owner: 'B', ttlMs: 6000, prefix: 'l2:' }), { renewEveryMs: 100 });
    assert.equal(await a.acquire('order:PO2'), true);
    assert.equal(await b.acquire('order:PO2'), false);
    // A renewal gives the holder its whole TTL again (A's timer is off: it renews by hand).
    assert.equal(await ca.client.pexpire(key, 1000), 1, 'the lease key exists');
    await a.renewAll();
    assert.ok((await ttlLeft()) > 1000, 'renewal extended the lease');
    assert.equal(await b.acquire('order:PO2'), false, 'renewed lease still held by A');
    // A stops renewing (as if dead) and its TTL runs out: B takes over at its next try.
    await ca.client.pexpire(key, 1);
    await poll(() => b.acquire('order:PO2'), { what: 'B to take the expired lease', timeoutMs: 5000, everyMs: 5 });
    assert.equal(await b.leases.holder('order:PO2'), 'B');
    // B keeps it alive by itself: each time its remaining time is cut short, B's keeper renews it.
    for (let round = 0; round < 3; round++) {
      await ca.client.pexpire(key, 3000);
      await poll(async () => (await ttlLeft()) > 3000, { what: `B's renewal (round ${round})`, timeoutMs: 10_000, everyMs: 5 });
    }
    assert.equal(await b.leases.holder('order:PO2'), 'B');
    // A comes back: its renewal fails and it is told the lease is lost; it cannot release B's lease.
    await a.renewAll();
    assert.deepEqual(lost, ['order:PO2']);
    assert.equal(a.isHeld('order:PO2'), false);
    await a.close();
    assert.equal(await b.leases.holder('order:PO2'), 'B');
    await b.close();
    assert.equal(await b.leases.holder('order:PO2'), null, 'close releases what is held');
    await ca.close();
    await cb.close();
  });
});
