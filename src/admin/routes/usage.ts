// GET /v1/usage: usage rollups per user and hour or day, with the amount billed, as JSON or CSV; with
// ?compare=platform, per main account and product, Rotor's bytes beside the platform's flow-use log.
import { z } from 'zod';
import { USER_NAME } from '../../config/schema.ts';
import { COMPARE_COLUMNS, toCsv, USAGE_COLUMNS } from '../../connlog/usage.ts';
import { invalid } from '../errors.ts';
import { zs } from '../validation.ts';
import { doc, type RegisterRoutes } from './common.ts';
import { timeQuery } from './time-query.ts';

const DAY_MS = 86_400_000;
/** The widest window one request may ask for. */
const MAX_WINDOW_DAYS = 800;

const query = z.strictObject({
  from: timeQuery.optional(),
  to: timeQuery.optional(),
  user: z.string().regex(USER_NAME, 'expected [A-Za-z0-9_.]+').max(64).optional(),
  granularity: z.enum(['hour', 'day']).default('day'),
  format: z.enum(['json', 'csv']).default('json'),
  compare: z.enum(['platform']).optional(),
});

const usageRow = {
  type: 'object',
  required: ['user', 'period', 'bytesUp', 'bytesDown', 'connections', 'failures', 'amount'],
  properties: {
    user: { type: 'string' },
    period: { type: 'string', description: "the hour's or day's start, RFC 3339 (UTC)" },
    bytesUp: { type: 'integer' },
    bytesDown: { type: 'integer' },
    connections: { type: 'integer' },
    failures: { type: 'integer' },
    amount: {
      type: ['number', 'null'],
      description: 'bytes × pricePerGb / 2^30 in billing.currency (header X-Rotor-Currency); null without a price',
    },
  },
};

const compareRow = {
  type: 'object',
  required: ['account', 'productNo', 'period', 'rotorBytes', 'platformBytes', 'differenceBytes'],
  properties: {
    account: { type: 'string', description: 'main account' },
    productNo: { type: 'string' },
    period: { type: 'string' },
    rotorBytes: { type: 'integer', description: "bytes Rotor counted for this main account's users" },
    platformBytes: {
      type: ['integer', 'null'],
      description: "the platform's flow-use log (ProxyFlowUseLog, bytes); null when it keeps none",
    },
    differenceBytes: { type: ['integer', 'null'], description: 'platformBytes - rotorBytes: charged by the platform, not billed by Rotor' },
  },
};

/** rotor-usage-<from day>-<to day>[-<user>][-platform].csv: only characters safe in a quoted header value. */
export function csvFileName(w: { from: number; to: number; user?: string }, compare: boolean): string {
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  return `rotor-usage-${day(w.from)}-${day(w.to - 1)}${w.user ? `-${w.user}` : ''}${compare ? '-platform' : ''}.csv`;
}

export const usageRoutes: RegisterRoutes = (app, deps) => {
  app.get<{ Querystring: z.output<typeof query> }>(
    '/usage',
    {
      schema: {
        operationId: 'getUsage',
        querystring: zs(query),
        ...doc(
          'usage',
          'usage per user and hour or day, with amounts (format=json|csv); compare=platform: Rotor vs the platform per main account',
          {
            200: {
              anyOf: [
                { type: 'array', items: usageRow },
                { type: 'array', items: compareRow },
              ],
            },
          },
        ),
      },
    },
    async (req, reply) => {
      const q = req.query;
      const to = q.to ?? Date.now();
      const from = q.from ?? to - 30 * DAY_MS;
      if (from >= to) throw invalid('query.from: must be before to');
      if (to - from > MAX_WINDOW_DAYS * DAY_MS) throw invalid(`query.from: the window may span at most ${MAX_WINDOW_DAYS} days`);
      const window = { from, to, granularity: q.granularity, ...(q.user !== undefined ? { user: q.user } : {}) };
      void reply.header('x-rotor-currency', deps.billing.currency);
      const rows = q.compare === 'platform' ? await deps.connections.comparePlatform(window) : await deps.connections.usage(window);
      if (q.format === 'csv') {
        // A file a spreadsheet opens on its own: named for what it holds, with the currency in every row
        // (a header alone is lost the moment the file is saved).
        const columns = q.compare === 'platform' ? COMPARE_COLUMNS : [...USAGE_COLUMNS, 'currency'];
        const withCurrency = q.compare === 'platform' ? rows : rows.map((r) => ({ ...r, currency: deps.billing.currency }));
        void reply.header('content-type', 'text/csv; charset=utf-8');
        void reply.header('content-disposition', `attachment; filename="${csvFileName(window, q.compare === 'platform')}"`);
        // Sent as text: the JSON serializer of the response schema must not see it.
        return reply
          .serializer((body: unknown) => body as string)
          .send(toCsv(columns, withCurrency as unknown as Record<string, unknown>[]));
      }
      return rows;
    },
  );
};
