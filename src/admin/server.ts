// The admin HTTP server: fastify with one plugin per resource under /v1, a bearer token on every /v1 route,
// one error handler for the error shape of interface.md, OpenAPI from the route schemas, and the
// unauthenticated probes /healthz, /readyz and /metrics.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import { isLoopbackHost } from '../config/schema.ts';
import { bearerChecker } from './auth.ts';
import type { AdminDeps } from './deps.ts';
import { registerApiDocs } from './docs.ts';
import { AdminConfigError, toErrorReply } from './errors.ts';
import { registerProbes } from './probes.ts';
import { ROUTES } from './routes/index.ts';
import { registerDashboard } from './ui/dashboard.ts';
import { StatsSampler, type StatsSamplerOptions } from '../telemetry/sampler.ts';
import { zodValidatorCompiler } from './validation.ts';

export interface AdminServerOptions {
  /** Bearer token for /v1; required unless `host` is a loopback address. */
  token?: string;
  /** The address the server will listen on (decides whether a token is required). */
  host: string;
  logger?: FastifyBaseLogger;
  /** Largest request body accepted, bytes; default 1 MiB. */
  bodyLimit?: number;
  /** config callback.path, for the OpenAPI document (the callback route lives on its own server). */
  callbackPath?: string;
  /** The dashboard's series (GET /v1/stats) when deps bring none: sampling interval, window, clock. */
  stats?: Omit<StatsSamplerOptions, 'source'>;
}

const isV1 = (url: string) => url === '/v1' || url.startsWith('/v1/') || url.startsWith('/v1?');

/**
 * Once listening, an 'error' on the server is a failed accept (EMFILE, ENFILE, ENOBUFS: the proxy listeners
 * share the process's descriptors): the server goes on accepting, so it is logged; without a listener it would
 * take the process down. Before that, fastify's listen() rejects on its own.
 */
export function keepAcceptingOnError(app: FastifyInstance, name: string): void {
  app.server.on('error', (err) => {
    if (app.server.listening) app.log.warn({ err }, `${name} server could not accept a connection`);
  });
}

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
  keepAcceptingOnError(app, 'admin');

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

  registerApiDocs(app, options.callbackPath ? { callbackPath: options.callbackPath } : {});
  registerDashboard(app);
  void app.register(async (scope) => registerProbes(scope, deps));
  const sampler = deps.stats ? undefined : new StatsSampler({ ...options.stats, source: deps.metrics });
  if (sampler) {
    app.addHook('onReady', () => sampler.start());
    app.addHook('onClose', async () => sampler.stop());
  }
  const routeDeps: AdminDeps = sampler ? { ...deps, stats: sampler } : deps;
  void app.register(
    async (v1) => {
      for (const register of ROUTES) register(v1, routeDeps);
    },
    { prefix: '/v1' },
  );
  return app;
}

export { buildCallbackServer, type CallbackServerOptions } from './callback-server.ts';
