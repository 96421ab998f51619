// UsageFold (src/store/connection-log-rollup.ts) keeps the last user's rows while its hour lasts: increments
// must still land in their own user's and period's rows when users alternate, an hour or a day ends, and
// after take() starts a new fold.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UsageFold } from '../../src/store/connection-log-rollup.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

test('increments land in their user, hour and day rows, whatever the order', () => {
  const fold = new UsageFold();
  const t0 = 10 * DAY + 23 * HOUR + 59 * 60_000; // one minute before a new day (and hour)
  fold.add('a', t0, 1, 10, 1, 0);
  fold.add('a', t0 + 1, 2, 20, 1, 1);
  fold.add('b', t0 + 2, 4, 40, 1, 0);
  fold.add('a', t0 + 3, 8, 80, 0, 0);
  fold.add('a', t0 + 120_000, 16, 160, 1, 0); // next hour, next day
  fold.add('b', t0 + 120_001, 32, 320, 1, 1);
  const rows = fold.take();
  const row = (user: string, granularity: string, period: number) =>
    rows.find((r) => r.user === user && r.granularity === granularity && r.period === period);
  const hour1 = 10 * DAY + 23 * HOUR;
  const hour2 = 11 * DAY;
  assert.deepEqual(
    [row('a', 'hour', hour1), row('a', 'day', 10 * DAY)].map((r) => r && [r.bytesUp, r.bytesDown, r.connections, r.failures]),
    [
      [11, 110, 2, 1],
      [11, 110, 2, 1],
    ],
  );
  assert.deepEqual([row('b', 'hour', hour1)!.bytesUp, row('b', 'day', 10 * DAY)!.connections], [4, 1]);
  assert.deepEqual([row('a', 'hour', hour2)!.bytesUp, row('a', 'day', 11 * DAY)!.bytesDown], [16, 160]);
  assert.deepEqual([row('b', 'hour', hour2)!.failures, row('b', 'day', 11 * DAY)!.bytesUp], [1, 32]);
  assert.equal(rows.length, 8);
  assert.equal(fold.size, 0);
  // After take(), the same user and hour start fresh rows (the taken ones are not written to again).
  fold.add('b', t0 + 120_002, 64, 0, 1, 0);
  const again = fold.take();
  assert.deepEqual(
    again.map((r) => [r.user, r.granularity, r.bytesUp]),
    [
      ['b', 'hour', 64],
      ['b', 'day', 64],
    ],
  );
  assert.equal(row('b', 'hour', hour2)!.bytesUp, 32, 'a taken row is never written again');
});
