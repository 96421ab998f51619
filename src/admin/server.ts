// The admin HTTP server: fastify with one plugin per resource under /v1, a bearer token on every /v1 route,
// one error handler for the error shape of interface.md, OpenAPI from the route schemas, and the
// unauthenticated probes /healthz, /readyz and /metrics.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import swagger from '@fastify/swagger';
import { isLoopbackHost } from '../config/schema.ts';
import { logFailedAccepts } from '../errors/failed-accept.ts';
import { bearerChecker } from './auth.ts';
import type { AdminDeps } from './deps.ts';
import { AdminConfigError, toErrorReply } from './errors.ts';
import { registerProbes } from './probes.ts';
import { ROUTES } from './routes/index.ts';
import { zodValidatorCompiler } from './validation.ts';

export interface AdminServerOptions {
  /** Bearer token for /v1; required unless `host` is a loopback address. */
  token?: string;
  /** The address the server will listen on (decides whether a token is required). */
  host: string;
  logger?: FastifyBaseLogger;
  /** Largest request body accepted, bytes; default 1 MiB. */
  bodyLimit?: number;
}

const isV1 = (url: string) => url === '/v1' || url.startsWith('/v1/') || url.startsWith('/v1?');

export function buildAdminServer(deps: AdminDeps, options: AdminServerOptions): FastifyInstance {
  if (!options.token && !isLoopbackHost(options.host)) {
    throw new AdminConfigError('admin.token', `required when admin.host (${options.host}) is not a loopback address`);
  }
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    // Longer than any identifier the routes take, so the schemas (not the router) say what is wrong.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 256 },
    // Errors the router raises before any route runs (bad URL encoding, overlong parameters) keep the shape.
    frameworkErrors: (err, _request, reply) => {
      const r = toErrorReply(err);
      void (reply as unknown as FastifyReply).status(r.status).send(r.body);
    },
  });
  app.setValidatorCompiler(zodValidatorCompiler);
  logFailedAccepts(app.server, 'admin server', app.log);

  const authorized = bearerChecker(options.token);
  app.addHook('onRequest', async (request, reply) => {
    if (!isV1(request.url) || authorized(request.headers.authorization)) return;
    reply.header('www-authenticate', 'Bearer');
    return reply.status(401).send({ error: { code: 'UNAUTHORIZED', message: request.headers.authorization ? 'bad token' : 'missing bearer token' } });
  });
  app.addHook('onResponse', async (request, reply) => {
    request.log.debug({ method: request.method, route: request.routeOptions.url, status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'admin request');
  });

  app.setErrorHandler((err, request, reply) => {
    const r = toErrorReply(err);
    if (r.status >= 500 && r.body.error.code === 'INTERNAL') request.log.error({ err }, 'admin route failed');
    else request.log.debug({ code: r.body.error.code, status: r.status }, 'admin request refused');
    return reply.status(r.status).send(r.body);
  });
  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send({ error: { code: 'NOT_FOUND', message: `no route ${request.method} ${request.url.split('?')[0]}` } }),
  );

  void app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'Rotor admin API', version: '1', description: 'Admin API of the Rotor proxy gateway (interface.md "Admin API").' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    },
  });
  void app.register(async (scope) => {
    registerProbes(scope, deps);
    scope.get('/docs/json', { schema: { hide: true } }, async () => scope.swagger());
  });
  void app.register(
    async (v1) => {
      for (const register of ROUTES) register(v1, deps);
    },
    { prefix: '/v1' },
  );
  return app;
}

export { buildCallbackServer, type CallbackServerOptions } from './callback-server.ts';
