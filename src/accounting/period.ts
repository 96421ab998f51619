// Quota periods: where the current period of a `day`, `week` (ISO, from Monday) or `month` quota starts and
// ends, as calendar periods in a configured IANA time zone (config `billing.timezone`, default UTC), and the
// key its usage is stored under. The one place period arithmetic lives: accounting keys usage by
// `periodKey`, events (issue 15's thresholds, once per period) import the same functions.
// Time zones come from Intl (the ICU data Node ships), so no dependency: the offset at an instant is what
// the zone's wall clock says minus UTC, and a local midnight is found by correcting for that offset twice
// (the second pass settles a DST change between the guess and the answer).
import { RotorError } from '../errors/rotor-error.ts';

export type QuotaPeriod = 'total' | 'day' | 'week' | 'month';
export const QUOTA_PERIODS: readonly QuotaPeriod[] = ['total', 'day', 'week', 'month'];

export class PeriodError extends RotorError {
  constructor(message: string) {
    super('PERIOD_INVALID', message, { httpStatus: 400 });
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      });
    } catch {
      throw new PeriodError(`unknown time zone ${JSON.stringify(timeZone)}`);
    }
    formatters.set(timeZone, f);
  }
  return f;
}

/** True when Intl knows the zone (config validation). */
export function isTimeZone(timeZone: string): boolean {
  try {
    formatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

interface Wall {
  year: number;
  month: number; // 1-12
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function wall(timeZone: string, t: number): Wall {
  const out: Record<string, number> = {};
  for (const p of formatter(timeZone).formatToParts(new Date(t))) if (p.type !== 'literal') out[p.type] = Number(p.value);
  return { year: out.year!, month: out.month!, day: out.day!, hour: out.hour! % 24, minute: out.minute!, second: out.second! };
}

/** The zone's offset from UTC at instant t, in ms (wall clock minus UTC). */
function offsetAt(timeZone: string, t: number): number {
  const w = wall(timeZone, t);
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  return asUtc - Math.floor(t / 1000) * 1000;
}

/** The instant the local date (y, m, d) begins in the zone (00:00 local, or the first instant after a gap). */
function localMidnight(timeZone: string, y: number, m: number, d: number): number {
  const guess = Date.UTC(y, m - 1, d);
  let t = guess - offsetAt(timeZone, guess);
  t = guess - offsetAt(timeZone, t);
  if (sameDate(wall(timeZone, t), y, m, d)) return t;
  // The date's 00:00 falls in a gap (a DST start at midnight: America/Santiago, America/Havana): t is an instant
  // of the day before. The date begins where the clock jumps: after t, by the day before's offset at the latest
  // (00:00 at that offset); the first instant of the date between the two, to the millisecond.
  let lo = t;
  let hi = guess - offsetAt(timeZone, t);
  if (!sameDate(wall(timeZone, hi), y, m, d)) return t;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (sameDate(wall(timeZone, mid), y, m, d)) hi = mid;
    else lo = mid;
  }
  return hi;
}

function sameDate(w: Wall, y: number, m: number, d: number): boolean {
  return w.year === y && w.month === m && w.day === d;
}

/** Calendar date arithmetic on (y, m, d) through UTC dates (no zone involved). */
function addDays(y: number, m: number, d: number, days: number): [number, number, number] {
  const x = new Date(Date.UTC(y, m - 1, d + days));
  return [x.getUTCFullYear(), x.getUTCMonth() + 1, x.getUTCDate()];
}

function startDate(period: Exclude<QuotaPeriod, 'total'>, w: Wall): [number, number, number] {
  if (period === 'day') return [w.year, w.month, w.day];
  if (period === 'month') return [w.year, w.month, 1];
  // ISO week: Monday is day 1.
  const weekday = new Date(Date.UTC(w.year, w.month - 1, w.day)).getUTCDay();
  return addDays(w.year, w.month, w.day, -((weekday + 6) % 7));
}

/** The period containing `now`, computed from the zone's wall clock (Intl: tens of microseconds a call). */
function computeWindow(period: Exclude<QuotaPeriod, 'total'>, timeZone: string, now: number): CachedWindow {
  const [y, m, d] = startDate(period, wall(timeZone, now));
  const [ny, nm, nd] =
    period === 'day' ? addDays(y, m, d, 1) : period === 'week' ? addDays(y, m, d, 7) : m === 12 ? [y + 1, 1, 1] : [y, m + 1, 1];
  return {
    start: localMidnight(timeZone, y, m, d),
    end: localMidnight(timeZone, ny, nm, nd),
    key: period === 'month' ? `month:${y}-${pad(m)}` : `${period}:${y}-${pad(m)}-${pad(d)}`,
  };
}

interface CachedWindow {
  start: number;
  end: number;
  key: string;
}

// The last window computed per (period, zone): every instant inside it has the same start, end and key, so
// 100,000 users' meters at start (and every roll) cost one Intl call per period, not one per user. Bounded by
// the periods times the zones configured.
const windows = new Map<string, CachedWindow>();

function windowAt(period: Exclude<QuotaPeriod, 'total'>, timeZone: string, now: number): CachedWindow {
  const id = `${period} ${timeZone}`;
  const cached = windows.get(id);
  if (cached !== undefined && now >= cached.start && now < cached.end) return cached;
  const w = computeWindow(period, timeZone, now);
  windows.set(id, w);
  return w;
}

/** Epoch ms where the period containing `now` starts (0 for `total`). */
export function periodStart(period: QuotaPeriod, timeZone: string, now: number): number {
  if (period === 'total') return 0;
  return windowAt(period, timeZone, now).start;
}

/** Epoch ms where the period containing `now` ends (the next one starts); Infinity for `total`. */
export function periodEnd(period: QuotaPeriod, timeZone: string, now: number): number {
  if (period === 'total') return Infinity;
  return windowAt(period, timeZone, now).end;
}

const pad = (n: number): string => String(n).padStart(2, '0');

/**
 * The period containing `now`, named by its local start date: `total`, `day:2026-11-24`, `week:2026-11-23`
 * (its Monday), `month:2026-11`. Stable across restarts and the same on every daemon of a fleet.
 */
export function periodKey(period: QuotaPeriod, timeZone: string, now: number): string {
  if (period === 'total') return 'total';
  return windowAt(period, timeZone, now).key;
}

/** The current period as accounting holds it: its key and the instant it ends. */
export interface PeriodWindow {
  key: string;
  endsAt: number;
}

export function periodWindow(period: QuotaPeriod, timeZone: string, now: number): PeriodWindow {
  return { key: periodKey(period, timeZone, now), endsAt: periodEnd(period, timeZone, now) };
}
