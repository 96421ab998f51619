// The platform's callbacks (seed part 6): GET <callback.path>?type=&no=&op= on a port of its own. The
// handler (src/orders/callbacks.ts) records the event durably and answers {"code":"success"}; this server
// only refuses what cannot be a callback and makes sure nothing thrown reaches the platform as a crash:
// any failure answers a code other than `success`, so the platform calls again.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { CallbackHandler } from './deps.ts';

export interface CallbackServerOptions {
  /** config callback.path, e.g. /callback */
  path: string;
  logger?: FastifyBaseLogger;
}

const TYPES = new Set(['order', 'instance', 'product']);
const TOKEN = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Why the query cannot be a callback, or undefined when it can. */
function malformed(query: Record<string, unknown>): string | undefined {
  for (const [k, v] of Object.entries(query)) if (typeof v !== 'string') return `${k} given more than once`;
  const { type, no, op } = query as Record<string, string | undefined>;
  if (type === undefined || !TYPES.has(type)) return 'type must be order, instance or product';
  if (no === undefined || !TOKEN.test(no)) return 'no is missing or malformed';
  if (op !== undefined && op !== '' && !/^\d{1,3}$/.test(op)) return 'op must be a number';
  return undefined;
}

export function buildCallbackServer(handle: CallbackHandler, options: CallbackServerOptions): FastifyInstance {
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 16 * 1024,
  });

  app.get(options.path, async (request, reply) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    const problem = malformed(query);
    if (problem) {
      request.log.warn({ problem }, 'malformed platform callback refused');
      return reply.status(400).send({ code: 'invalid', msg: problem });
    }
    const answer = await handle(query);
    return reply.status(answer.status).send(answer.body);
  });

  app.setErrorHandler((err, request, reply) => {
    const status = (err as { statusCode?: number }).statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500) return reply.status(status).send({ code: 'invalid', msg: 'bad request' });
    request.log.error({ err }, 'callback handling failed; the platform will call again');
    return reply.status(500).send({ code: 'error', msg: 'not recorded, call again' });
  });
  app.setNotFoundHandler((_request, reply) => reply.status(404).send({ code: 'not_found', msg: 'no such callback path' }));
  return app;
}
