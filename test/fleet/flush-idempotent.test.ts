// In a fleet a quota meter's flush goes through the allowance leaser (its report path: usage that did not go through
// the shares, e.g. adopted from the platform, moved into the fleet's `used` by the next sync). Such a flush can be
// taken by the leaser and still be seen failing (here: the sync landed in Redis, and the leaser's exhausted-state
// listener threw on its answer; the re-read of the fleet's totals after it failed too). The flush is written again as it was, with its batch id, and the leaser takes a
// batch once: before, the retry reported the whole delta again (the traffic bytes among it as adopted usage too),
// and the fleet's quota counted it twice. Real redis-server; the real Accounting and AllowanceLeaser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Accounting } from '../../src/accounting/accounting.ts';
import { AllowanceLeaser } from '../../src/fleet/allowance.ts';
import { RedisAllowance } from '../../src/store/redis-fleet-allowance.ts';
import { openRedisStore } from '../../src/store/index.ts';
import { redisMissing, redisForFile } from './redis-server.ts';
import { captureLogger } from '../support/logger.ts';

const MiB = 1024 * 1024;
const server = redisForFile((_a: Redis) => undefined);

test('a fleet flush the leaser took but that was seen failing is counted once when written again', { skip: redisMissing }, async () => {
  const prefix = 'fleetflush:';
  const store = await openRedisStore(server.url, { prefix, commandTimeoutMs: 10_000 });
  let failNext = false;
  const leaser = new AllowanceLeaser(new RedisAllowance(store.connection, prefix), {
    instance: 'A',
    sliceBytes: MiB,
    syncEveryMs: 600_000,
    // The listener told of a user becoming exhausted fails once (after its sync landed in Redis).
    onChange: (_user, exhausted) => {
      if (exhausted && failNext) {
        failNext = false;
        throw new Error('a listener failed');
      }
    },
  });
  const { logger, text } = captureLogger('info');
  // The re-read of the fleet's totals after that flush fails too (a Redis blip): the meter keeps its own view.
  let readFails = 0;
  const flaky = new Proxy(store, {
    get(t, p) {
      if (p === 'usageChangedSince')
        return async (...args: Parameters<typeof store.usageChangedSince>) => {
          if (readFails > 0) {
            readFails--;
            throw new Error('redis unavailable: Command timed out');
          }
          return t.usageChangedSince(...args);
        };
      const v = Reflect.get(t, p, t) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  const accounting = new Accounting({ store: flaky, allowance: leaser, flushIntervalMs: 600_000, logger });
  try {
    await accounting.start([{ name: 'carol', limitBytes: 10 * MiB }]);
    accounting.meter('carol').add(0, 300_000);
    await accounting.flush();
    // The platform counted more than the fleet: adopted, past the limit; the flush's sync lands, then fails.
    failNext = true;
    readFails = 1;
    assert.equal(accounting.adoptUsage('carol', 11 * MiB), true);
    await accounting.flush();
    assert.match(text(), /could not persist traffic counters/, 'the flush was seen failing');
    // Written again at the next flush (and the stop's).
    await accounting.flush();
    await accounting.close();
    await leaser.close();
    const row = await store.getUsage('carol');
    assert.equal(row?.usedBytes, 11 * MiB, `the fleet's used: ${row?.usedBytes} B (adopted ${11 * MiB} B)`);
  } finally {
    await accounting.close();
    await leaser.close();
    await store.close();
  }
});
