// A point in time in a query string: RFC 3339 (2026-01-31T10:00:00Z) or epoch milliseconds.
import { z } from 'zod';

export const timeQuery = z.string().transform((v, ctx) => {
  const ms = /^\d{1,16}$/.test(v) ? Number(v) : /^\d{4}-\d\d-\d\d(T[\d:.]+(Z|[+-]\d\d:\d\d)?)?$/.test(v) ? Date.parse(v) : Number.NaN;
  if (!Number.isFinite(ms)) {
    ctx.addIssue({ code: 'custom', message: 'expected an RFC 3339 time (2026-01-31T10:00:00Z) or epoch milliseconds' });
    return z.NEVER;
  }
  return ms;
});
