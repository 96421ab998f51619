// GET /v1/events?since=<id>&limit=<n>: events as the webhook sends them (src/events/), oldest first after
// `since`, with how their delivery stands. Page on with since = the last id received.
import { z } from 'zod';
import { AdminError } from '../errors.ts';
import { zs } from '../validation.ts';
import { doc, type RegisterRoutes } from './common.ts';

const whole = (max: number) =>
  z
    .string()
    .regex(/^\d{1,15}$/, 'expected a whole number')
    .transform(Number)
    .pipe(z.number().int().min(0).max(max));

const query = z.strictObject({
  since: whole(Number.MAX_SAFE_INTEGER).optional(),
  limit: whole(1000).pipe(z.number().min(1, 'must be 1 to 1000')).optional(),
});

const eventSchema = {
  type: 'object',
  required: ['id', 'type', 'time', 'data', 'delivery'],
  properties: {
    id: { type: 'integer', description: 'increasing; receivers dedupe by it' },
    type: { type: 'string', enum: ['user.quota.80', 'user.quota.100', 'user.expired', 'balance.low', 'order.final'] },
    time: { type: 'string', format: 'date-time' },
    data: { type: 'object', additionalProperties: true },
    delivery: {
      type: 'object',
      properties: {
        delivered: { type: 'boolean' },
        attempts: { type: 'integer' },
        deliveredAt: { type: ['string', 'null'], format: 'date-time' },
        nextAttemptAt: {
          type: ['string', 'null'],
          format: 'date-time',
          description: 'null when delivered or when no webhook is configured',
        },
        lastError: { type: ['string', 'null'] },
      },
    },
  },
};

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export const eventRoutes: RegisterRoutes = (app, deps) => {
  app.get<{ Querystring: z.output<typeof query> }>(
    '/events',
    {
      schema: {
        querystring: zs(query),
        operationId: 'listEvents',
        ...doc('events', 'events after `since` (an event id), oldest first, as the webhook sends them, with their delivery state', {
          200: { type: 'array', items: eventSchema },
        }),
      },
    },
    async (req) => {
      if (!deps.events) throw new AdminError(503, 'EVENTS_UNAVAILABLE', 'events are not kept by this server');
      const list = await deps.events.list({ since: req.query.since ?? 0, limit: req.query.limit ?? 100 });
      return list.map((e) => ({
        id: e.id,
        type: e.type,
        time: new Date(e.time).toISOString(),
        data: e.data,
        delivery: {
          delivered: e.deliveredAt !== null,
          attempts: e.attempts,
          deliveredAt: iso(e.deliveredAt),
          nextAttemptAt: iso(e.nextAttemptAt),
          lastError: e.lastError,
        },
      }));
    },
  );
};
