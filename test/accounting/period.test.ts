// Quota period arithmetic (src/users/period.ts) against known calendar facts: ISO weeks from Monday, month
// ends, time zones east and west of UTC, and a DST change (a 23-hour and a 25-hour day).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isTimeZone, periodEnd, periodKey, periodStart, periodWindow } from '../../src/accounting/period.ts';

const iso = (t: number) => new Date(t).toISOString();

test('day, week and month in UTC', () => {
  const t = Date.parse('2026-11-24T13:45:00Z'); // a Tuesday
  assert.equal(periodKey('day', 'UTC', t), 'day:2026-11-24');
  assert.equal(iso(periodStart('day', 'UTC', t)), '2026-11-24T00:00:00.000Z');
  assert.equal(iso(periodEnd('day', 'UTC', t)), '2026-11-25T00:00:00.000Z');
  assert.equal(periodKey('week', 'UTC', t), 'week:2026-11-23');
  assert.equal(iso(periodEnd('week', 'UTC', t)), '2026-11-30T00:00:00.000Z');
  assert.equal(periodKey('month', 'UTC', t), 'month:2026-11');
  assert.equal(iso(periodEnd('month', 'UTC', Date.parse('2026-12-31T23:59:59Z'))), '2027-01-01T00:00:00.000Z');
  assert.equal(periodKey('total', 'UTC', t), 'total');
  assert.equal(periodStart('total', 'UTC', t), 0);
  assert.equal(periodEnd('total', 'UTC', t), Infinity);
  // A Sunday belongs to the week that began on the Monday before.
  assert.equal(periodKey('week', 'UTC', Date.parse('2026-11-29T23:00:00Z')), 'week:2026-11-23');
});

test('time zones: the local calendar decides, boundaries are local midnights', () => {
  const t = Date.parse('2026-11-24T23:30:00Z');
  assert.equal(periodKey('day', 'UTC', t), 'day:2026-11-24');
  assert.equal(periodKey('day', 'Asia/Kolkata', t), 'day:2026-11-25');
  assert.equal(iso(periodStart('day', 'Asia/Kolkata', t)), '2026-11-24T18:30:00.000Z');
  assert.equal(periodKey('day', 'America/Los_Angeles', t), 'day:2026-11-24');
  assert.equal(iso(periodStart('day', 'America/Los_Angeles', t)), '2026-11-24T08:00:00.000Z');
  assert.equal(periodKey('month', 'Pacific/Kiritimati', Date.parse('2026-11-30T11:00:00Z')), 'month:2026-12');
});

test('DST: the spring day has 23 hours, the autumn day 25', () => {
  const spring = Date.parse('2026-03-29T12:00:00Z');
  assert.equal(periodEnd('day', 'Europe/Berlin', spring) - periodStart('day', 'Europe/Berlin', spring), 23 * 3600_000);
  const autumn = Date.parse('2026-10-25T12:00:00Z');
  assert.equal(periodEnd('day', 'Europe/Berlin', autumn) - periodStart('day', 'Europe/Berlin', autumn), 25 * 3600_000);
  const w = periodWindow('day', 'Europe/Berlin', autumn);
  assert.equal(w.key, 'day:2026-10-25');
  assert.equal(iso(w.endsAt), '2026-10-25T23:00:00.000Z');
});

test('a boundary instant starts the next period; unknown zones are refused', () => {
  const end = periodEnd('day', 'UTC', Date.parse('2026-11-24T10:00:00Z'));
  assert.equal(periodKey('day', 'UTC', end), 'day:2026-11-25');
  assert.equal(periodKey('day', 'UTC', end - 1), 'day:2026-11-24');
  assert.equal(isTimeZone('Europe/Berlin'), true);
  assert.equal(isTimeZone('Mars/Olympus'), false);
  assert.throws(() => periodKey('day', 'Mars/Olympus', 0), /unknown time zone/);
});

test('the window of an instant is the same asked in any order (across boundaries, zones, back and forth)', () => {
  const dayEnd = Date.parse('2026-11-24T23:59:59.999Z');
  const next = dayEnd + 1;
  for (const t of [dayEnd, next, dayEnd, next - 86_400_000, next, next + 86_400_000 * 40, dayEnd]) {
    const d = new Date(t);
    const ymd = `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}-${String(d.getUTCDate()).padStart(2, '0')}`;
    assert.equal(periodKey('day', 'UTC', t), `day:${ymd}`);
    assert.equal(periodKey('month', 'UTC', t), `month:${ymd.slice(0, 7)}`);
    assert.ok(periodStart('day', 'UTC', t) <= t && t < periodEnd('day', 'UTC', t));
  }
  // The same instant in two zones keeps each zone's own answer.
  const t = Date.parse('2026-11-24T23:30:00Z');
  for (let i = 0; i < 3; i++) {
    assert.equal(periodKey('day', 'Asia/Kolkata', t), 'day:2026-11-25');
    assert.equal(periodKey('day', 'UTC', t), 'day:2026-11-24');
  }
});

test("100,000 users' period windows at start cost one calendar computation per period, not one per user", () => {
  // Intl's formatToParts is tens of microseconds a call: 100,000 of them were seconds of a restart. Counted, not
  // timed: a loaded machine makes any wall-clock bound on a loop a coin toss.
  const proto = Intl.DateTimeFormat.prototype;
  const real = proto.formatToParts;
  let calls = 0;
  proto.formatToParts = function (this: Intl.DateTimeFormat, date?: Date | number) {
    calls++;
    return real.call(this, date);
  };
  try {
    const t = Date.now();
    const keys = new Set<string>();
    for (let i = 0; i < 100_000; i++) keys.add(periodWindow(i % 2 === 0 ? 'day' : 'month', 'Europe/Berlin', t + (i % 1000)).key);
    // A window is the zone's wall clock at the instant and at its two midnights (two passes each): 5 calls. Two
    // periods, and each may be computed once more if the second of instants crosses its end (none at all when an
    // earlier test in the process left both windows cached).
    assert.ok(calls <= 2 * 2 * 5, `${calls} calendar computations for 100,000 windows`);
    assert.ok(keys.size >= 2 && keys.size <= 4, `keys ${[...keys].join(', ')}`);
  } finally {
    proto.formatToParts = real;
  }
});

test('DST at midnight: a day whose 00:00 does not exist begins where the clock jumps, and every instant is inside its window', () => {
  // America/Santiago 2026-09-06 00:00 -04 -> 01:00 -03; America/Havana 2026-03-08 00:00 -05 -> 01:00 -04. The day
  // before ended an hour early (at 23:00 local): for that hour every admission rolled and every flush walked the
  // meters, the period containing `now` having ended already.
  for (const [zone, at, day, starts] of [
    ['America/Santiago', '2026-09-06T03:30:00Z', 'day:2026-09-05', '2026-09-06T04:00:00.000Z'],
    ['America/Havana', '2026-03-08T04:30:00Z', 'day:2026-03-07', '2026-03-08T05:00:00.000Z'],
  ] as const) {
    const now = Date.parse(at);
    assert.equal(periodKey('day', zone, now), day);
    assert.equal(iso(periodEnd('day', zone, now)), starts, `${zone}: ${day} ends where the next day begins`);
    assert.equal(iso(periodStart('day', zone, Date.parse(starts))), starts);
    assert.equal(periodEnd('day', zone, Date.parse(starts)) - Date.parse(starts), 23 * 3600_000);
  }
  // Every 20 minutes of 2025-2026 in zones with DST changes at, before and after midnight: start <= now < end.
  const zones = [
    'America/Santiago',
    'America/Havana',
    'America/Asuncion',
    'Europe/Berlin',
    'America/New_York',
    'Australia/Sydney',
    'Pacific/Chatham',
    'Atlantic/Azores',
    'Asia/Beirut',
  ];
  for (const zone of zones) {
    for (let t = Date.parse('2025-01-01T00:00:00Z'); t < Date.parse('2027-01-01T00:00:00Z'); t += 20 * 60_000) {
      for (const period of ['day', 'week', 'month'] as const) {
        const start = periodStart(period, zone, t);
        const end = periodEnd(period, zone, t);
        if (!(start <= t && t < end))
          assert.fail(`${zone} ${periodKey(period, zone, t)}: start ${iso(start)}, end ${iso(end)}, now ${iso(t)}`);
      }
    }
  }
});
