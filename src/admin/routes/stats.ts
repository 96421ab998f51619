// GET /v1/stats: the dashboard's last hour (throughput, connections by result, upstream failures and hedges,
// sessions, balances), sampled from the metrics registry by src/telemetry/sampler.ts. `since` (epoch ms)
// returns only newer points, so a page that polls fetches the hour once and then a point or two.
import { z } from 'zod';
import { zs } from '../validation.ts';
import { doc, type RegisterRoutes } from './common.ts';

const counts = { type: 'object', additionalProperties: { type: 'number' } };
const statsAnswer = {
  type: 'object',
  required: ['intervalMs', 'windowMs', 'points', 'totals', 'users', 'balances'],
  properties: {
    intervalMs: { type: 'integer', description: 'time between points' },
    windowMs: { type: 'integer', description: 'how far back points are kept' },
    points: {
      type: 'array',
      description: 'oldest first; rates and counts over the interval ending at t',
      items: {
        type: 'object',
        properties: {
          t: { type: 'integer', description: 'epoch ms' },
          upBytesPerSec: { type: 'integer' },
          downBytesPerSec: { type: 'integer' },
          connectionsActive: { type: 'integer' },
          sessionsActive: { type: 'integer' },
          connections: { ...counts, description: 'new connections by result' },
          failures: { ...counts, description: 'upstream failures by reason' },
          hedges: { ...counts, description: 'hedged dials by outcome' },
        },
      },
    },
    totals: {
      type: 'object',
      description: 'since the daemon started',
      properties: { connections: counts, failures: counts, hedges: counts, bytesUp: { type: 'integer' }, bytesDown: { type: 'integer' } },
    },
    users: {
      type: 'array',
      description: 'bytes per second per user over the last interval, busiest first',
      items: { type: 'object', properties: { name: { type: 'string' }, bytesPerSec: { type: 'integer' } } },
    },
    balances: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          account: { type: 'string' },
          product: { type: 'string' },
          value: { type: 'number' },
          unit: { type: 'string', enum: ['bytes', 'MB'] },
        },
      },
    },
  },
};

export const statsRoutes: RegisterRoutes = (app, deps) => {
  const stats = deps.stats;
  if (!stats) return;
  app.get<{ Querystring: { since?: number } }>(
    '/stats',
    {
      schema: {
        operationId: 'getStats',
        querystring: zs(z.strictObject({ since: z.coerce.number().int().min(0).optional() })),
        ...doc('stats', "the dashboard's series: the last hour of throughput, connections, refusals, failures, hedges; balances", {
          200: statsAnswer,
        }),
      },
    },
    async (req) => stats.view(req.query.since),
  );
};
