// How a Redis operation's failure is named to its callers: an outage (the server gone, a command timed out) is
// STORE_UNAVAILABLE, which callers retry; a fault of Rotor's own code inside the operation (a stack overflow from
// spreading a long list into one call, a TypeError) is STORE_FAILED, which retrying cannot mend. Real redis-server.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connection, HoldingRelay, redisMissing, startRedis, type RedisServer } from '../fleet/redis-server.ts';
import type { RedisConnection } from '../../src/store/redis-connection.ts';

let server: RedisServer | undefined;
let conn: RedisConnection;

before(async () => {
  if (redisMissing) return;
  server = await startRedis();
  conn = await connection(server!.url, 'errors');
});
after(async () => {
  await conn?.close();
  await server?.stop();
});

test('a fault of our own code inside a Redis operation is STORE_FAILED, not an outage', { skip: redisMissing }, async () => {
  const huge = new Array<string>(2_000_000).fill('x');
  const overflow = await conn
    .run('spread', (c) => c.del(...(huge as [string])))
    .then(
      () => undefined,
      (e: unknown) => e as { code?: string; message?: string },
    );
  assert.equal(overflow?.code, 'STORE_FAILED', JSON.stringify(overflow));
  assert.match(String(overflow?.message), /failed in Rotor before reaching redis/);
  const typeError = await conn
    .run('type', async () => {
      const missing = undefined as unknown as { call(): void };
      missing.call();
    })
    .then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
  assert.equal(typeError?.code, 'STORE_FAILED');
});

test('a command that times out is still STORE_UNAVAILABLE', { skip: redisMissing }, async () => {
  const relay = await new HoldingRelay(Number(new URL(server!.url).port)).start();
  const held = await connection(relay.url, 'held', 200);
  try {
    relay.held = true;
    const slow = await held
      .run('slow', (c) => c.get('k'))
      .then(
        () => undefined,
        (e: unknown) => e as { code?: string },
      );
    assert.equal(slow?.code, 'STORE_UNAVAILABLE');
  } finally {
    relay.release();
    await held.close();
    await relay.close();
  }
});
