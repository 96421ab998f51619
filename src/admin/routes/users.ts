// Users as data (docs/reference.md "Users as data"): list (paged, filtered), create, read, patch, delete, set or
// generate a password, and the older PUT …/limit. Records come from the users directory (src/users/).
// Paging: GET /v1/users stays an array (each item keeps name, usedBytes, limitBytes, activeConnections) of at
// most `?limit=` users (default 100, at most 1,000); when more follow, the `x-next-cursor` response header
// holds the cursor to pass as `?after=` for the next page; `x-total-count` counts every match. Order: names
// ascending, or `?sort=usage` (usedBytes descending, then name). `?prefix=` searches by name prefix.
import { z } from 'zod';
import { createUserSchema, passwordBodySchema, patchUserSchema, userName } from '../../users/record.ts';
import { AdminError } from '../errors.ts';
import { batchBodySchema, BATCH_MAX } from '../../users/bulk.ts';
import { PAGE_MAX } from '../../users/listing.ts';
import { zs } from '../validation.ts';
import { boolQuery, doc, noQuery, type RegisterRoutes } from './common.ts';

const nullable = (schema: Record<string, unknown>) => ({ anyOf: [schema, { type: 'null' }] });
const stringList = { type: 'array', items: { type: 'string' } };
const portList = { type: 'array', items: { type: 'integer' } };

/** A user record as answered (fast-json-stringify writes exactly these fields). */
const userView = {
  type: 'object',
  required: ['name', 'usedBytes', 'limitBytes', 'activeConnections'],
  properties: {
    name: { type: 'string' },
    usedBytes: { type: 'integer', description: 'bytes used in the current quota period, both directions' },
    limitBytes: { type: 'integer', description: 'quota.bytes; -1 = unlimited' },
    activeConnections: { type: 'integer' },
    mainAccount: { type: 'string' },
    product: { type: 'string' },
    draw: { type: 'string', enum: ['pwd', 'api'] },
    sessTime: { type: 'integer' },
    quota: {
      type: 'object',
      properties: { bytes: { type: 'integer' }, period: { type: 'string', enum: ['total', 'day', 'week', 'month'] } },
    },
    periodKey: { type: 'string', description: 'the current quota period (total, day:YYYY-MM-DD, week:YYYY-MM-DD (Monday), month:YYYY-MM)' },
    rateBytesPerSec: { type: 'integer', description: 'both directions, all connections; 0 = none' },
    maxConnections: { type: 'integer', description: 'concurrent; 0 = none' },
    expiresAt: { type: ['string', 'null'] },
    enabled: { type: 'boolean' },
    pricePerGb: { type: ['number', 'null'] },
    listen: nullable({ type: 'object', properties: { port: { type: 'integer' }, allowIps: stringList, tls: { type: 'boolean' } } }),
    rules: { type: 'object', properties: { denyPorts: portList, denyHosts: stringList, allowPorts: portList, allowHosts: stringList } },
    requestRules: {
      type: 'array',
      description: 'request rules (retry, ban, retry_ban, tag) checked before proxy.requestRules',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string' },
          hosts: stringList,
          status: { type: 'array', items: { type: 'integer' } },
          timeoutMs: { type: 'integer' },
          headers: { type: 'object', additionalProperties: { type: 'string' } },
          action: { type: 'string', enum: ['retry', 'ban', 'retry_ban', 'tag'] },
          retries: { type: 'integer' },
          banSeconds: { type: 'integer' },
          banHost: { type: 'boolean' },
          methods: stringList,
          body: { type: 'string', description: 'plain HTTP: a pattern in the first bodyBytes of the response body' },
          bodyBytes: { type: 'integer' },
        },
      },
    },
    metrics: { type: 'boolean', description: "always export this user's per-user metric series" },
    instances: nullable({ ...stringList, description: 'static instances the user may name with -instance-; null = every running one' }),
    products: nullable({
      ...stringList,
      description:
        'products the user may name with -product- besides its default product (always allowed); null = every one, [] = the default only',
    }),
    source: { type: 'string', enum: ['config', 'api'] },
    state: { type: 'string', enum: ['creating', 'ready'] },
    platformAccount: {
      type: 'object',
      description:
        'present only when Rotor could not make the user\'s platform sub account (it was lost and re-creating it failed): state "failed", the reason, when',
      properties: { state: { type: 'string', enum: ['failed'] }, reason: { type: 'string' }, at: { type: 'string', format: 'date-time' } },
    },
    createdAt: { type: 'string' },
    password: { type: 'string', description: 'only when Rotor generated it, in that one answer' },
  },
};

const nameParams = zs(z.strictObject({ name: userName }));

const listQuery = z.strictObject({
  prefix: z.string().max(32).optional(),
  enabled: boolQuery.optional(),
  source: z.enum(['config', 'api']).optional(),
  period: z.enum(['total', 'day', 'week', 'month']).optional(),
  limit: z.coerce.number().int().min(1).max(PAGE_MAX).optional(),
  after: z.string().max(64).optional(),
  sort: z.enum(['name', 'usage']).optional(),
});

export const userRoutes: RegisterRoutes = (app, deps) => {
  listAndCreateRoutes(app, deps);
  batchRoute(app, deps);
  recordRoutes(app, deps);
};

type RouteArgs = Parameters<RegisterRoutes>;

/** GET /v1/users (one page) and POST /v1/users. */
function listAndCreateRoutes(...[app, deps]: RouteArgs): void {
  app.get<{ Querystring: z.output<typeof listQuery> }>(
    '/users',
    {
      schema: {
        operationId: 'listUsers',
        querystring: zs(listQuery),
        ...doc(
          'users',
          'one page of users with their usage (name order, or ?sort=usage: most bytes first); ?limit= (default 100, max 1000), ?prefix= searches names; the x-next-cursor header gives ?after= for the next page, x-total-count counts every match',
          {
            200: { type: 'array', items: userView },
          },
        ),
      },
    },
    async (req, reply) => {
      const { items, next, total } = await deps.users.list(req.query);
      if (next !== null) void reply.header('x-next-cursor', next);
      void reply.header('x-total-count', String(total));
      return items;
    },
  );
  app.post<{ Body: z.output<typeof createUserSchema> }>(
    '/users',
    {
      schema: {
        operationId: 'createUser',
        body: zs(createUserSchema),
        ...doc(
          'users',
          'create a user and its platform sub account (password generated and returned once when absent); 409 when the name exists',
          { 201: userView },
        ),
      },
    },
    async (req, reply) => {
      const view = await deps.users.create(req.body);
      return reply.code(201).send(view);
    },
  );
}

/** POST /v1/users/batch: many users in one call, each row on its own. */
function batchRoute(...[app, deps]: RouteArgs): void {
  app.post<{ Body: z.output<typeof batchBodySchema> }>(
    '/users/batch',
    {
      // 10,000 rows of a few hundred bytes each.
      bodyLimit: 16 * 1024 * 1024,
      schema: {
        operationId: 'createUsersBatch',
        body: zs(batchBodySchema),
        ...doc(
          'users',
          `create up to ${BATCH_MAX} users ({"users": [records as for POST /v1/users, or with passwordHash]}); each row is validated on its own and a row that fails does not stop the others; generated passwords come back once in \`passwords\``,
          {
            200: {
              type: 'object',
              required: ['created', 'errors', 'passwords'],
              properties: {
                created: { type: 'integer' },
                errors: {
                  type: 'array',
                  items: {
                    type: 'object',
                    required: ['index', 'name', 'code', 'message'],
                    properties: {
                      index: { type: 'integer' },
                      name: { type: ['string', 'null'] },
                      code: { type: 'string' },
                      message: { type: 'string' },
                    },
                  },
                },
                passwords: { type: 'object', additionalProperties: { type: 'string' } },
              },
            },
          },
        ),
      },
    },
    async (req) => deps.users.createBatch(req.body.users),
  );
}

/** One user's record: read, change, delete, password and quota. */
function recordRoutes(...[app, deps]: RouteArgs): void {
  app.get<{ Params: { name: string } }>(
    '/users/:name',
    {
      schema: {
        operationId: 'getUser',
        params: nameParams,
        querystring: noQuery,
        ...doc('users', 'one user record with its usage', { 200: userView }),
      },
    },
    async (req) => {
      const view = deps.users.get(req.params.name);
      if (!view) throw new AdminError(404, 'UNKNOWN_USER', `unknown user ${req.params.name}`);
      return view;
    },
  );
  app.patch<{ Params: { name: string }; Body: z.output<typeof patchUserSchema> }>(
    '/users/:name',
    {
      schema: {
        operationId: 'patchUser',
        params: nameParams,
        body: zs(patchUserSchema),
        ...doc('users', "change any subset of a user's fields; rate and quota act on open connections, disabling closes them", {
          200: userView,
        }),
      },
    },
    async (req) => deps.users.patch(req.params.name, req.body),
  );
  app.delete<{ Params: { name: string } }>(
    '/users/:name',
    {
      schema: {
        operationId: 'deleteUser',
        params: nameParams,
        querystring: noQuery,
        ...doc('users', 'delete a user: new connections refused at once, open ones closed (its usage history stays)', {
          204: { type: 'null', description: 'deleted' },
        }),
      },
    },
    async (req, reply) => {
      await deps.users.remove(req.params.name);
      return reply.code(204).send();
    },
  );
  app.post<{ Params: { name: string }; Body: z.output<typeof passwordBodySchema> | undefined }>(
    '/users/:name/password',
    {
      schema: {
        operationId: 'setUserPassword',
        params: nameParams,
        body: zs(passwordBodySchema.optional()),
        ...doc('users', 'set the user\'s password ({"password"}) or generate one ({} or no body: returned once as `password`)', {
          200: userView,
        }),
      },
    },
    async (req) => deps.users.setPassword(req.params.name, req.body?.password),
  );
  app.put<{ Params: { name: string }; Body: { limitBytes: number } }>(
    '/users/:name/limit',
    {
      schema: {
        operationId: 'setUserLimit',
        params: nameParams,
        body: zs(z.strictObject({ limitBytes: z.number().int().min(-1).max(Number.MAX_SAFE_INTEGER) })),
        ...doc('users', "set a user's quota bytes (-1 = unlimited); a config user keeps it across restarts until the config changes it", {
          200: userView,
        }),
      },
    },
    async (req) => deps.users.setLimit(req.params.name, req.body.limitBytes),
  );
}
