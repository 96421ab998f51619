// The Redis writers' marks (usage:writers, connlog:writers) were timed and trimmed by each daemon's own clock (its
// Date.now sent to the script): one daemon of a fleet whose clock was more than 30 days ahead removed the other
// daemons' marks with its next write, and a daemon whose clock was as far behind had its own removed by theirs; that
// daemon's batch written again (a reply lost past the command timeout) was then counted a second time. The marks
// are now timed by Redis's own clock (TIME), one for the fleet. Real redis-server of its own; the stores' `now`
// is each daemon's clock.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { openRedisStore, type RedisStore } from '../../src/store/index.ts';
import type { UsageRollup } from '../../src/store/connection-log-types.ts';
import { redisMissing, RedisServer } from '../fleet/redis-server.ts';

const DAY = 86_400_000;
const HOUR = 3_600_000;
const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

test('a meter flush written again after another daemon (clock 31 days ahead) wrote: added once', { skip: redisMissing }, async () => {
  const prefix = 'clock1:';
  const a = await openRedisStore(server.url, { prefix });
  const b = await openRedisStore(server.url, { prefix, now: () => Date.now() + 31 * DAY });
  try {
    await a.addUsage([{ user: 'alice', bytes: 1000 }], 'writerA.7');
    // Another daemon of the fleet writes its own flush (its clock is wrong by a month).
    await b.addUsage([{ user: 'bob', bytes: 1 }], 'writerB.1');
    // Daemon A's flush 7 landed but its reply was lost: written again as it was.
    await a.addUsage([{ user: 'alice', bytes: 1000 }], 'writerA.7');
    assert.equal((await a.getUsage('alice'))?.usedBytes, 1000);
  } finally {
    await a.close();
    await b.close();
  }
});

test('a daemon whose clock is 31 days behind: its flush written again is added once', { skip: redisMissing }, async () => {
  const prefix = 'clock2:';
  const a = await openRedisStore(server.url, { prefix, now: () => Date.now() - 31 * DAY });
  const b = await openRedisStore(server.url, { prefix });
  try {
    await a.addUsage([{ user: 'carol', bytes: 500 }], 'writerA.3');
    await b.addUsage([{ user: 'dave', bytes: 1 }], 'writerB.1');
    await a.addUsage([{ user: 'carol', bytes: 500 }], 'writerA.3');
    assert.equal((await a.getUsage('carol'))?.usedBytes, 500);
  } finally {
    await a.close();
    await b.close();
  }
});

async function billed(store: RedisStore, user: string, period: number): Promise<number> {
  const rows = await store.connectionLog().usage({ granularity: 'hour', from: period - HOUR, to: period + 2 * HOUR });
  return rows.filter((r) => r.user === user).reduce((s, r) => s + r.bytesDown, 0);
}

test('a connection-log unit written again after a daemon 31 days ahead wrote: added once', { skip: redisMissing }, async () => {
  const prefix = 'clock3:';
  const a = await openRedisStore(server.url, { prefix });
  const b = await openRedisStore(server.url, { prefix, now: () => Date.now() + 31 * DAY });
  const period = Math.floor(Date.now() / HOUR) * HOUR;
  const row = (user: string, down: number): UsageRollup[] => [
    { user, granularity: 'hour', period, bytesUp: 0, bytesDown: down, connections: 1, failures: 0 },
  ];
  try {
    await a.connectionLog().append([], row('erin', 2000), 'logA.5');
    await b.connectionLog().append([], row('frank', 1), 'logB.1');
    await a.connectionLog().append([], row('erin', 2000), 'logA.5');
    assert.equal(await billed(a, 'erin', period), 2000);
  } finally {
    await a.close();
    await b.close();
  }
});
