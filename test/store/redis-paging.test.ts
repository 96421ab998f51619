// Listing many records from Redis at a reseller's size: each command's timeout runs from when it is sent, so
// a listing sent as one pipeline fails as soon as its replies take longer than the timeout to arrive and be
// read (100,000 users' records did, at a daemon's start). Here a relay in front of a real redis-server carries
// at most RATE bytes a second each way, so a listing in one round trip would take several timeouts' time while
// a page of it takes a fraction of one: the listings must come back whole, not fail.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openRedisStore, type RedisStore } from '../../src/store/index.ts';
import { PacedRelay, redisMissing, RedisServer } from '../fleet/redis-server.ts';

/** Bytes a second through the relay, each way. */
const RATE = 250_000;
const TIMEOUT_MS = 2000;
const USERS = 5000;
const SESSIONS = 5000;

const redis = new RedisServer();
let relay: PacedRelay;
let direct: RedisStore;

before(async () => {
  if (redisMissing) return;
  await redis.start();
  relay = await new PacedRelay(redis.port, RATE).start();
  // The setup's own connection is not under test: a generous timeout (a batch of 1,000 users timed out at 1 s
  // on a loaded machine).
  direct = await openRedisStore(redis.url, { prefix: 'page:', commandTimeoutMs: 10_000 });
});

after(async () => {
  if (redisMissing) return;
  await direct.close();
  await relay.close();
  await redis.stop();
});

const HASH = `scrypt$16384$8$1$${'a'.repeat(22)}$${'b'.repeat(43)}`;

test(`${USERS} users listed through a slow link whose whole listing outlasts the command timeout`, { skip: redisMissing }, async () => {
  for (let from = 0; from < USERS; from += 1000) {
    const writes = [];
    for (let i = from; i < from + 1000; i++)
      writes.push({
        user: { name: `u${String(i).padStart(5, '0')}`, data: { note: 'a customer' }, passwordHash: HASH, state: 'ready' as const },
      });
    await direct.putUsers(writes);
  }
  const slow = await openRedisStore(relay.url, { prefix: 'page:', commandTimeoutMs: TIMEOUT_MS });
  try {
    const started = Date.now();
    const users = await slow.listUsers();
    assert.equal(users.length, USERS);
    assert.equal(users[0]?.name, 'u00000');
    assert.equal(users[USERS - 1]?.name, `u${String(USERS - 1).padStart(5, '0')}`);
    assert.equal(users[1234]?.passwordHash, HASH);
    // The link was slow enough that one round trip for everything would have outlasted the timeout.
    assert.ok(Date.now() - started > TIMEOUT_MS, `the listing took ${Date.now() - started} ms: the relay did not slow it`);
    const changed = await slow.usersChangedSince(0);
    assert.equal(changed.changed.length, USERS);
    const usage = await slow.listUsage();
    assert.ok(Array.isArray(usage));
  } finally {
    await slow.close();
  }
});

test('a listing sends a command per page of records, not one per record', { skip: redisMissing }, async () => {
  // The users written by the test above (or here, run alone).
  if ((await direct.listUsers()).length < USERS) {
    const writes = [];
    for (let i = 0; i < USERS; i++)
      writes.push({ user: { name: `u${String(i).padStart(5, '0')}`, data: {}, passwordHash: HASH, state: 'ready' as const } });
    for (let from = 0; from < USERS; from += 1000) await direct.putUsers(writes.slice(from, from + 1000));
  }
  const client = direct.connection.client as unknown as { sendCommand: (...a: unknown[]) => unknown };
  const send = client.sendCommand;
  let sent = 0;
  client.sendCommand = function (this: unknown, ...a: unknown[]) {
    sent++;
    return send.apply(this, a);
  };
  try {
    const users = await direct.listUsers();
    assert.equal(users.length, USERS);
    assert.equal(users[4321]?.passwordHash, HASH);
    // Before: one HGETALL per record, each a command object and a reply of its own in the client (5,000 here;
    // at a fleet daemon's restart with 100,000 users, ~2 s of its CPU).
    assert.ok(sent <= Math.ceil(USERS / 200) + 4, `${sent} commands sent to list ${USERS} users`);
  } finally {
    client.sendCommand = send;
  }
});

test(`${SESSIONS} sticky sessions put back through the same slow link`, { skip: redisMissing }, async () => {
  const slow = await openRedisStore(relay.url, { prefix: 'page:', commandTimeoutMs: TIMEOUT_MS });
  try {
    const sessions = slow.fleetState().sessions<{ id: string; host: string }>();
    const expiresAt = Date.now() + 600_000;
    const list = [];
    for (let i = 0; i < SESSIONS; i++)
      list.push({ user: `u${i}`, sessionId: `s${i}`, node: { id: `n${i % 7}`, host: '127.0.0.1' }, startedAt: Date.now(), expiresAt });
    assert.equal(await sessions.restore(list), SESSIONS);
    // Put back once: a second restore finds every binding there and puts none.
    assert.equal(await sessions.restore(list.slice(0, 600)), 0);
  } finally {
    await slow.close();
  }
});
