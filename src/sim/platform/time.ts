// Calendar arithmetic for durations (seed 2.1): months and years move the calendar date, not a fixed count of
// days; a month end clamps (Jan 31 + 1 month = Feb 28/29). Times are UTC.

export const UNIT = { day: 1, week: 2, month: 3, year: 4, unlimited: 10 } as const;

/** Adds n × unit to epoch seconds; unit 10 (unlimited) answers 0 (no expiry). */
export function addPeriod(fromSec: number, unit: number, n: number): number {
  if (unit === UNIT.unlimited) return 0;
  if (unit === UNIT.day) return fromSec + n * 86_400;
  if (unit === UNIT.week) return fromSec + n * 7 * 86_400;
  const months = unit === UNIT.year ? 12 * n : n;
  const d = new Date(fromSec * 1000);
  const day = d.getUTCDate();
  d.setUTCDate(1);
  d.setUTCMonth(d.getUTCMonth() + months);
  const lastDay = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
  d.setUTCDate(Math.min(day, lastDay));
  return Math.floor(d.getTime() / 1000);
}

/** RFC 3339 without fractions, as Go encodes time.Time; 0 encodes as Go's zero time. */
export function rfc3339(ms: number): string {
  if (!ms) return '0001-01-01T00:00:00Z';
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** "YYYY-MM-DD HH:MM:SS" (UTC) → epoch ms */
export function parseDateTime(text: string): number {
  return Date.parse(`${text.replace(' ', 'T')}Z`);
}
