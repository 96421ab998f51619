// Unauthenticated probes: process up, really ready, and the metrics registry in Prometheus text format.
import type { FastifyInstance } from 'fastify';
import type { AdminDeps, Readiness } from './deps.ts';

const readinessSchema = {
  type: 'object',
  properties: {
    ready: { type: 'boolean' },
    checks: { type: 'object', properties: { platform: { type: 'boolean' }, store: { type: 'boolean' }, listeners: { type: 'boolean' } } },
  },
} as const;

export function registerProbes(app: FastifyInstance, deps: Pick<AdminDeps, 'ready' | 'metrics'>): void {
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'getHealth',
        security: [],
        tags: ['probes'],
        summary: 'process up',
        response: { 200: { type: 'object', properties: { status: { type: 'string' } } } },
      },
    },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'getReadiness',
        security: [],
        tags: ['probes'],
        summary: 'platform reachable, store open, listeners up',
        response: { 200: readinessSchema, 503: readinessSchema },
      },
    },
    async (_req, reply) => {
      let checks: Readiness;
      try {
        checks = await deps.ready();
      } catch {
        checks = { platform: false, store: false, listeners: false };
      }
      const ready = checks.platform === true && checks.store === true && checks.listeners === true;
      return reply.status(ready ? 200 : 503).send({ ready, checks });
    },
  );

  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'getMetrics',
        security: [],
        tags: ['probes'],
        summary: 'Prometheus text format',
        produces: ['text/plain'],
        response: { 200: { description: 'the metrics registry', content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    },
    async (_req, reply) => {
      const text = await deps.metrics.metrics();
      return reply.type(deps.metrics.contentType).send(text);
    },
  );
}
