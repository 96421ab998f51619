// The platform's callbacks (seed part 6): GET <callback.path>?type=&no=&op= on a port of its own. The
// handler (src/orders/callbacks.ts) validates, records the event durably and answers {"code":"success"}
// (400 for malformed input); this server answers what it says and makes sure nothing thrown reaches the
// platform as a crash: any failure answers a code other than `success`, so the platform calls again.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { CallbackHandler } from './deps.ts';
import { logFailedAccepts } from '../errors/failed-accept.ts';
import { boundListener, CALLBACK_LIMITS, STOP_GRACE_MS } from './http-limits.ts';

export interface CallbackServerOptions {
  /** config callback.path, e.g. /callback */
  path: string;
  logger?: FastifyBaseLogger;
}

export function buildCallbackServer(handle: CallbackHandler, options: CallbackServerOptions): FastifyInstance {
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 16 * 1024,
  });
  logFailedAccepts(app.server, 'callback server', app.log);
  const bound = boundListener(app.server, CALLBACK_LIMITS);
  // A stop closes connections without a request at once: they would hold the close (src/admin/http-limits.ts).
  app.addHook('preClose', (done) => {
    bound.closing(STOP_GRACE_MS);
    done();
  });

  app.get(options.path, async (request, reply) => {
    const answer = await handle((request.query ?? {}) as Record<string, unknown>);
    return reply.status(answer.status).send(answer.body);
  });

  app.addHook('onResponse', async (request, reply) => {
    const line = {
      method: request.method,
      route: request.routeOptions.url ?? request.url.split('?')[0],
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime),
    };
    if (reply.statusCode >= 400 && reply.statusCode < 500) request.log.warn(line, 'callback refused');
    else request.log.debug(line, 'callback request');
  });

  app.setErrorHandler((err, request, reply) => {
    const status = (err as { statusCode?: number }).statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500)
      return reply.status(status).send({ code: 'invalid', msg: 'bad request' });
    request.log.error({ route: options.path, err }, 'callback handling failed; the platform will call again');
    return reply.status(500).send({ code: 'error', msg: 'not recorded, call again' });
  });
  app.setNotFoundHandler((_request, reply) => reply.status(404).send({ code: 'not_found', msg: 'no such callback path' }));
  return app;
}
