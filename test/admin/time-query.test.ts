// Times in query strings (GET /v1/usage, /v1/connections, …): the same instants whatever the daemon host's zone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { timeQuery } from '../../src/admin/routes/time-query.ts';

const inZone = <T>(zone: string, run: () => T): T => {
  const saved = process.env.TZ;
  process.env.TZ = zone;
  try {
    return run();
  } finally {
    if (saved === undefined) delete process.env.TZ;
    else process.env.TZ = saved;
  }
};

test('a date-time without an offset is UTC, like a date alone, on a host in any zone', () => {
  for (const zone of ['UTC', 'Asia/Shanghai', 'America/Santiago']) {
    inZone(zone, () => {
      assert.equal(new Date(timeQuery.parse('2026-11-29T00:00:00')).toISOString(), '2026-11-29T00:00:00.000Z', zone);
      assert.equal(new Date(timeQuery.parse('2026-11-29T10:30')).toISOString(), '2026-11-29T10:30:00.000Z', zone);
      assert.equal(new Date(timeQuery.parse('2026-11-29')).toISOString(), '2026-11-29T00:00:00.000Z', zone);
    });
  }
});

test('offsets, fractions, lowercase separators and epoch milliseconds are read as written', () => {
  assert.equal(new Date(timeQuery.parse('2026-11-29T08:00:00+08:00')).toISOString(), '2026-11-29T00:00:00.000Z');
  assert.equal(new Date(timeQuery.parse('2026-11-29t00:00:00.250z')).toISOString(), '2026-11-29T00:00:00.250Z');
  assert.equal(timeQuery.parse('1764374400000'), 1764374400000);
  assert.equal(new Date(timeQuery.parse('2028-02-29T23:59:59.999-14:00')).toISOString(), '2028-03-01T13:59:59.999Z');
  assert.equal(new Date(timeQuery.parse('2026-11-29T10:00:00.123456789Z')).toISOString(), '2026-11-29T10:00:00.123Z');
});

test('anything else is refused with the expected forms named', () => {
  for (const bad of [
    '2026-11-29T',
    '2026-11-29T::',
    'yesterday',
    '2026-13-01',
    '2026-11-29T25:00:00Z',
    '2026-11-29T00:00:00+8',
    // Days and times that do not exist are refused, not rolled over into the next month or day.
    '2026-02-31',
    '2026-04-31T10:00:00Z',
    '2025-02-29',
    '2026-11-29T24:00:00Z',
    '2026-11-29T10:60:00Z',
    '2026-11-29T10:00:61Z',
    '2026-11-29T10:00:00+23:59',
    '2026-11-29T10:00:00+05:60',
  ]) {
    const r = timeQuery.safeParse(bad);
    assert.equal(r.success, false, bad);
    if (!r.success) assert.match(r.error.issues[0]!.message, /RFC 3339/);
  }
});
