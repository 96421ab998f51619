// The connection log: GET /v1/connections (records, newest first, cursor paging and filters),
// GET /v1/connections/active (live connections with their bytes so far), DELETE /v1/connections/:id
// (close one live connection now).
import { z } from 'zod';
import { USER_NAME } from '../../config/schema.ts';
import { RECORD_RESULTS, type RecordResult } from '../../connlog/types.ts';
import { notFound } from '../errors.ts';
import { zs } from '../validation.ts';
import { doc, noQuery, type RegisterRoutes } from './common.ts';
import { timeQuery } from './time-query.ts';

const nullable = (type: string, description?: string) => ({ type: [type, 'null'], ...(description ? { description } : {}) });

const common = {
  id: { type: 'string', description: 'the connection id, as in the log lines about it' },
  user: nullable('string', 'the authenticated user; null when authentication failed'),
  session: nullable('string', 'sticky session id; null = rotating'),
  listener: {
    type: 'string',
    description: 'http, https, socks5 (the shared listeners) or user-port-http, user-port-https, user-port-socks5 (a user port)',
  },
  client: nullable('string', "the client's source address; absent when log.access.clients is false"),
  target: nullable('string', 'host:port; absent when log.access.targets is false'),
  node: nullable('string', "the upstream's id (never its password)"),
  exit: { type: 'string', description: 'the address the upstream said the connection left from; absent when it said none' },
  bytesUp: { type: 'integer' },
  bytesDown: { type: 'integer' },
  startedAt: { type: 'integer', description: 'epoch ms' },
  durationMs: { type: 'integer' },
};

const recordSchema = {
  type: 'object',
  required: ['id', 'listener', 'bytesUp', 'bytesDown', 'startedAt', 'durationMs', 'result'],
  properties: {
    ...common,
    result: { type: 'string', enum: RECORD_RESULTS },
    reason: nullable('string', 'the refusal or failure; for ok how it ended: closed, idle, limit, error, stopped, killed'),
    retries: { type: 'integer' },
    hedges: { type: 'integer' },
    rule: {
      type: ['string', 'null'],
      description: "the request rule that fired (proxy.requestRules / the user's requestRules), when one did",
    },
    count: {
      type: 'integer',
      description: 'refusals before authentication: the attempts from one source address this record stands for (absent: 1)',
    },
  },
};

const liveSchema = { type: 'object', required: ['id', 'listener', 'bytesUp', 'bytesDown', 'startedAt', 'durationMs'], properties: common };

const listQuery = z.strictObject({
  user: z.string().regex(USER_NAME, 'expected [A-Za-z0-9_.]+').max(64).optional(),
  result: z.enum(RECORD_RESULTS as [RecordResult, ...RecordResult[]]).optional(),
  since: timeQuery.optional(),
  until: timeQuery.optional(),
  limit: z
    .string()
    .regex(/^\d{1,4}$/, 'expected a whole number from 1 to 1000')
    .transform(Number)
    .pipe(z.number().int().min(1, 'expected a whole number from 1 to 1000').max(1000, 'expected a whole number from 1 to 1000'))
    .optional(),
  cursor: z.string().min(1).max(200).optional(),
});

const idParam = z.strictObject({ id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'expected a connection id') });

export const connectionRoutes: RegisterRoutes = (app, deps) => {
  app.get<{ Querystring: z.output<typeof listQuery> }>(
    '/connections',
    {
      schema: {
        operationId: 'listConnections',
        querystring: zs(listQuery),
        ...doc('connections', 'connection records, newest first (filters: user, result, since, until; cursor paging)', {
          200: {
            type: 'object',
            required: ['items', 'next'],
            properties: {
              items: { type: 'array', items: recordSchema },
              next: nullable('string', 'cursor of the next page; null at the end'),
            },
          },
        }),
      },
    },
    async (req) => {
      const q = req.query;
      return deps.connections.list({
        ...(q.user !== undefined ? { user: q.user } : {}),
        ...(q.result !== undefined ? { result: q.result } : {}),
        ...(q.since !== undefined ? { since: q.since } : {}),
        ...(q.until !== undefined ? { until: q.until } : {}),
        ...(q.cursor !== undefined ? { cursor: q.cursor } : {}),
        limit: q.limit ?? 100,
      });
    },
  );
  app.get(
    '/connections/active',
    {
      schema: {
        operationId: 'listActiveConnections',
        querystring: noQuery,
        ...doc('connections', 'live connections with their bytes so far', { 200: { type: 'array', items: liveSchema } }),
      },
    },
    async () => deps.connections.active(),
  );
  app.delete<{ Params: { id: string } }>(
    '/connections/:id',
    {
      schema: {
        operationId: 'closeConnection',
        params: zs(idParam),
        ...doc('connections', 'close one live connection now (its record says reason killed)', {
          200: { type: 'object', properties: { id: { type: 'string' }, closed: { type: 'boolean' } } },
        }),
      },
    },
    async (req) => {
      if (!deps.connections.closeConnection(req.params.id)) throw notFound(`live connection ${req.params.id}`);
      return { id: req.params.id, closed: true };
    },
  );
};
