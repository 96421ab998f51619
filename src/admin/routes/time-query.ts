// A point in time in a query string: RFC 3339 (2026-01-31T10:00:00Z) or epoch milliseconds. A date alone and a
// date-time without an offset are UTC, as every usage row is: never the daemon host's zone, so one URL means the
// same window wherever the daemon runs.
import { z } from 'zod';

const RFC3339 = /^(\d{4}-\d\d-\d\d)(?:[Tt ](\d\d:\d\d(?::\d\d(?:\.\d{1,9})?)?)([Zz]|[+-]\d\d:\d\d)?)?$/;

export const timeQuery = z.string().transform((v, ctx) => {
  const m = RFC3339.exec(v);
  const ms = /^\d{1,16}$/.test(v)
    ? Number(v)
    : m
      ? Date.parse(m[2] === undefined ? m[1]! : `${m[1]}T${m[2]}${(m[3] ?? 'Z').toUpperCase()}`)
      : Number.NaN;
  if (!Number.isFinite(ms)) {
    ctx.addIssue({ code: 'custom', message: 'expected an RFC 3339 time (2026-01-31T10:00:00Z) or epoch milliseconds' });
    return z.NEVER;
  }
  return ms;
});
