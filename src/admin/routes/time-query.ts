// A point in time in a query string: RFC 3339 (2026-01-31T10:00:00Z) or epoch milliseconds. A date alone and a
// date-time without an offset are UTC, as every usage row is: never the daemon host's zone, so one URL means the
// same window wherever the daemon runs. A date or time that does not exist (02-31, 24:00, an offset past ±14:00)
// is refused, never rolled over into another day.
import { z } from 'zod';

const RFC3339 = /^(\d{4})-(\d\d)-(\d\d)(?:[Tt ](\d\d):(\d\d)(?::(\d\d)(\.\d{1,9})?)?([Zz]|([+-])(\d\d):(\d\d))?)?$/;

function parse(v: string): number {
  if (/^\d{1,16}$/.test(v)) return Number(v);
  const m = RFC3339.exec(v);
  if (!m) return Number.NaN;
  const [y, mo, d, h = 0, mi = 0, s = 0] = [m[1], m[2], m[3], m[4], m[5], m[6]].map((x) => (x === undefined ? undefined : Number(x)));
  const day = Date.UTC(y!, mo! - 1, d!);
  const back = new Date(day);
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== mo! - 1 || back.getUTCDate() !== d) return Number.NaN;
  if (h > 23 || mi > 59 || s > 59) return Number.NaN;
  const offsetMin = m[9] === undefined ? 0 : (m[9] === '-' ? -1 : 1) * (Number(m[10]) * 60 + Number(m[11]));
  if (m[9] !== undefined && (Number(m[11]) > 59 || Math.abs(offsetMin) > 14 * 60)) return Number.NaN;
  const fraction = m[7] === undefined ? 0 : Math.floor(Number(m[7]) * 1000);
  return day + ((h * 60 + mi) * 60 + s) * 1000 + fraction - offsetMin * 60_000;
}

export const timeQuery = z.string().transform((v, ctx) => {
  const ms = parse(v);
  if (!Number.isFinite(ms)) {
    ctx.addIssue({ code: 'custom', message: 'expected an RFC 3339 time (2026-01-31T10:00:00Z) or epoch milliseconds' });
    return z.NEVER;
  }
  return ms;
});
