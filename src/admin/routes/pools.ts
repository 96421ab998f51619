// GET /v1/pools: every upstream pool with its nodes (no passwords).
import { doc, noQuery, type RegisterRoutes } from './common.ts';

const node = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    protocol: { type: 'string' },
    host: { type: 'string' },
    port: { type: 'integer' },
    source: { type: 'string' },
    state: { type: 'string', enum: ['ready', 'cooling'] },
    fails: { type: 'integer' },
    activeConnections: { type: 'integer' },
    expiresAt: { type: 'integer' },
    coolingUntil: { type: 'integer' },
    lastFailedAt: { type: 'integer' },
    awaitingProbe: { type: 'boolean' },
    lastProbe: {
      type: 'object',
      properties: { at: { type: 'integer' }, ok: { type: 'boolean' }, latencyMs: { type: 'integer' }, reason: { type: 'string' } },
    },
  },
};
const pool = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    key: { type: 'object', properties: { user: { type: 'string' }, productNo: { type: 'string' }, region: { type: 'string' } } },
    strategy: { type: 'string' },
    ready: { type: 'integer' },
    cooling: { type: 'integer' },
    drawing: { type: 'boolean' },
    drawError: {
      type: 'object',
      properties: { message: { type: 'string' }, code: { type: 'string' }, consecutive: { type: 'integer' }, retryAt: { type: 'integer' } },
    },
    ipsLeft: { type: 'integer' },
    /** the last draw brought only nodes already held: no refill before this time unless needed */
    quietUntil: { type: 'integer' },
    nodes: { type: 'array', items: node },
  },
};

export const poolRoutes: RegisterRoutes = (app, deps) => {
  app.get(
    '/pools',
    {
      schema: {
        operationId: 'listPools',
        querystring: noQuery,
        ...doc('pools', 'upstream pools per (user, product, region) and their nodes', { 200: { type: 'array', items: pool } }),
      },
    },
    async () => deps.pools.snapshot(),
  );
};
