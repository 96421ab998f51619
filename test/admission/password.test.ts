// Password hashing off the event loop: real scrypt on libuv's pool through the bounded, prioritized queue.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  HashBusyError,
  HashQueue,
  hashPasswordAsync,
  hashQueue,
  importedHashProblem,
  verifyPasswordAsync,
} from '../../src/admission/password.ts';

test('hashes made on the thread pool verify, sync and async; a malformed hash is false after the same work', async () => {
  const h = await hashPasswordAsync('s3cret', { priority: 'bulk' });
  assert.match(h, /^scrypt\$16384\$8\$1\$/);
  assert.equal(await verifyPasswordAsync('s3cret', h), true);
  assert.equal(await verifyPasswordAsync('other', h), false);
  assert.equal(await verifyPasswordAsync('s3cret', 'plain-text'), false);
});

test('the event loop keeps turning while hashes run', async () => {
  let turns = 0;
  const tick = setInterval(() => turns++, 1);
  await Promise.all(Array.from({ length: 4 }, () => hashPasswordAsync('x')));
  clearInterval(tick);
  // scryptSync would have held the loop for the whole time: no interval callback in between.
  assert.ok(turns >= 4, `turns ${turns}`);
  assert.deepEqual(hashQueue.stats, { running: 0, queued: 0 });
});

test('the queue runs at most `concurrency` at once, logins first, and sheds logins beyond maxQueued', async () => {
  const q = new HashQueue({ concurrency: 2, maxQueued: 2 });
  let running = 0;
  let most = 0;
  const order: string[] = [];
  const gates: (() => void)[] = [];
  const job = (name: string) => () =>
    new Promise<string>((resolve) => {
      running++;
      most = Math.max(most, running);
      order.push(name);
      gates.push(() => {
        running--;
        resolve(name);
      });
    });
  const all = [
    q.run('bulk', job('b1')),
    q.run('bulk', job('b2')),
    q.run('bulk', job('b3')),
    q.run('admin', job('a1')),
    q.run('login', job('l1')),
    q.run('login', job('l2')),
  ];
  // Two running, four waiting: a third login is refused at once.
  await assert.rejects(q.run('login', job('l3')), HashBusyError);
  assert.deepEqual(q.stats, { running: 2, queued: 4 });
  while (gates.length > 0) {
    gates.shift()!();
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all(all);
  assert.equal(most, 2);
  assert.deepEqual(order, ['b1', 'b2', 'l1', 'l2', 'a1', 'b3']);
});

test("the portal's sign-ins come after every admin write, in turn with bulk imports, and are shed beyond maxQueued on their own", async () => {
  const q = new HashQueue({ concurrency: 1, maxQueued: 2 });
  const order: string[] = [];
  const gates: (() => void)[] = [];
  const job = (name: string) => () =>
    new Promise<string>((resolve) => {
      order.push(name);
      gates.push(() => resolve(name));
    });
  const all = [q.run('portal', job('p1')), q.run('portal', job('p2')), q.run('portal', job('p3'))];
  // One running, two waiting: a fourth sign-in is refused at once; the proxy's logins have their own bound.
  await assert.rejects(q.run('portal', job('p4')), HashBusyError);
  all.push(
    q.run('bulk', job('b1')),
    q.run('bulk', job('b2')),
    q.run('admin', job('a1')),
    q.run('login', job('l1')),
    q.run('login', job('l2')),
  );
  await assert.rejects(q.run('login', job('l3')), HashBusyError);
  while (gates.length > 0) {
    gates.shift()!();
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all(all);
  assert.deepEqual(order, ['p1', 'l1', 'l2', 'a1', 'b1', 'p2', 'b2', 'p3']);
});

test("an imported hash is refused past 16 times the work of Rotor's own (N × r × p ≤ 2^21); a stored one past the memory bound is false, not an error", async () => {
  const salt = Buffer.alloc(16, 7).toString('base64');
  const key = Buffer.alloc(32, 9).toString('base64');
  const h = (n: number, r: number, p: number) => `scrypt$${n}$${r}$${p}$${salt}$${key}`;
  assert.equal(importedHashProblem(h(16_384, 8, 1)), undefined, "Rotor's own parameters");
  assert.equal(importedHashProblem(h(262_144, 8, 1)), undefined, '2^21: 16 times the work, 256 MiB');
  assert.match(importedHashProblem(h(262_144, 8, 2)) ?? '', /N × r × p must be at most 2097152/);
  assert.match(importedHashProblem(h(1_048_576, 32, 1)) ?? '', /N × r × p/, '4 GiB per check before');
  assert.match(importedHashProblem(h(16_384, 16, 16)) ?? '', /N × r × p/);
  // A hash stored before the bound (or written straight into the store) whose check cannot run: false, at the
  // dummy's cost, instead of an error on every login.
  assert.equal(await verifyPasswordAsync('any', h(1_048_576, 32, 1)), false);
});
