// A listing's page comes back as one reply string (store/redis.ts HASHES: the page as JSON text), not as a
// nested array of ~7 replies per usage row and ~11 per user record: ioredis decodes each reply element on the
// daemon's event loop, and a fleet daemon's restart at 20,000 users read ~70,000 records. A relay counts the
// reply lines Redis sends during a listing; the records still come back whole, in order, missing keys left out
// and awkward values (quotes, backslashes, newlines, non-ASCII, empty strings) intact.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openRedisStore } from '../../src/store/index.ts';
import { CountingRelay, redisMissing, RedisServer } from '../fleet/redis-server.ts';

const redis = new RedisServer();
let relay: CountingRelay;

before(async () => {
  if (redisMissing) return;
  await redis.start();
  relay = await new CountingRelay(redis.port).start();
});

after(async () => {
  if (redisMissing) return;
  await relay.close();
  await redis.stop();
});

test('a listing of 1,000 usage rows reads one reply string per page', { skip: redisMissing }, async () => {
  const store = await openRedisStore(relay.url, { prefix: 'rpr:', commandTimeoutMs: 30_000 });
  try {
    const names = Array.from({ length: 1000 }, (_, i) => `u${String(i).padStart(4, '0')}`);
    await store.setLimits(names.map((user, i) => ({ user, limitBytes: 1000 + i })));
    // The page script loaded once, outside the count.
    assert.equal((await store.getUsages(['u0001'])).length, 1);
    relay.replyLines = 0;
    relay.counting = true;
    const rows = await store.getUsages(names);
    relay.counting = false;
    assert.deepEqual(
      rows.map((r) => [r.user, r.limitBytes]),
      names.map((n, i) => [n, 1000 + i]),
    );
    // 5 pages of 200: a bulk string's header and its text per page. Before: 1 + 200 × 7 lines per page.
    assert.ok(relay.replyLines <= 5 * 2, `${relay.replyLines} reply lines for 5 pages`);
  } finally {
    relay.counting = false;
    await store.close();
  }
});

test('user records with awkward values come back intact, missing ones left out', { skip: redisMissing }, async () => {
  const store = await openRedisStore(relay.url, { prefix: 'rpr2:', commandTimeoutMs: 30_000 });
  try {
    const notes = ['quote " and \\ backslash', 'line\r\nbreak\ttab', 'ünïcødé ✓ 𝄞 \u2028', '', '{"looks":"like json"}', '/slash/'];
    for (const [i, note] of notes.entries())
      await store.putUser({
        name: `w${i}`,
        data: { note, n: i, nested: { list: [note, null, 1.5] } },
        passwordHash: `h"${i}\\`,
        state: 'ready',
      });
    await store.deleteUser('w1');
    const listed = await store.listUsers();
    assert.deepEqual(
      listed.map((u) => [u.name, u.data, u.passwordHash]),
      notes.flatMap((note, i) => (i === 1 ? [] : [[`w${i}`, { note, n: i, nested: { list: [note, null, 1.5] } }, `h"${i}\\`]])),
    );
    // Rows asked for by key, some missing: only the existing ones, in the order asked.
    await store.setLimits([
      { user: 'a', limitBytes: 1 },
      { user: 'c', limitBytes: 3 },
    ]);
    assert.deepEqual(
      (await store.getUsages(['c', 'missing', 'a', 'also-missing'])).map((r) => [r.user, r.limitBytes]),
      [
        ['c', 3],
        ['a', 1],
      ],
    );
    assert.deepEqual(await store.getUsages(['missing']), []);
  } finally {
    await store.close();
  }
});
