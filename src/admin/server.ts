// The admin HTTP server: fastify with one plugin per resource under /v1, a bearer token on every /v1 route,
// one error handler for the error shape of docs/reference.md, OpenAPI from the route schemas, and the
// unauthenticated probes /healthz, /readyz and /metrics.
//
// The token is checked by a hook of the /v1 scope, so it runs for whatever route the router MATCHED there
// (and for the scope's own 404), however the client spelled the target: percent-encoded, absolute form,
// `;` parameters, dot segments. A check on the raw URL's prefix (as before) let `/%761/users` and
// `GET http://x/v1/app` through. Before any route, every request passes the Host/Origin policy (origin.ts).
import { isIP } from 'node:net';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { isLoopbackHost } from '../config/schema.ts';
import { logFailedAccepts } from '../errors/failed-accept.ts';
import { AdminToken } from './auth.ts';
import { ADMIN_LIMITS, boundListener, STOP_GRACE_MS } from './http-limits.ts';
import { createOriginPolicy, hostName } from './origin.ts';
import type { AdminDeps } from './deps.ts';
import { registerApiDocs } from './docs.ts';
import { AdminConfigError, toErrorReply } from './errors.ts';
import { registerProbes } from './probes.ts';
import { ROUTES } from './routes/index.ts';
import { registerDashboard } from './ui/dashboard.ts';
import { StatsSampler, type StatsSamplerOptions } from '../telemetry/sampler.ts';
import { zodValidatorCompiler } from './validation.ts';
import { buildLazySerializer } from './lazy-serializers.ts';

export interface AdminServerOptions {
  /** Bearer token for /v1; required unless `host` is a loopback address. An AdminToken lets a reload replace it. */
  token?: string | AdminToken;
  /** The address the server will listen on (decides whether a token is required). */
  host: string;
  logger?: FastifyBaseLogger;
  /** Largest request body accepted, bytes; default 1 MiB. */
  bodyLimit?: number;
  /** config admin.allowedHosts (see origin.ts) */
  allowedHosts?: readonly string[];
  /** config admin.allowedOrigins (see origin.ts) */
  allowedOrigins?: readonly string[];
  /**
   * The port is reached by more than operators (config admin.allowedHosts names a public host the admin port
   * itself answers: the portal on it): /metrics and /docs need the token too. Default: a token is set and
   * allowedHosts names a host other than loopback. The daemon says false when those names are the portal's own
   * listener's and the admin port is on loopback.
   */
  published?: boolean;
  /**
   * config admin.metricsToken: 'always' = with a token set, /metrics and /docs need it on every request; 'auto'
   * (default) = when the port is published, the request names a public host, or it came through a proxy.
   */
  metricsToken?: 'auto' | 'always';
  /** config callback.path, for the OpenAPI document (the callback route lives on its own server). */
  callbackPath?: string;
  /** The dashboard's series (GET /v1/stats) when deps bring none: sampling interval, window, clock. */
  stats?: Omit<StatsSamplerOptions, 'source'>;
}

/** Routes for operators only once the port is published: the metrics and the API's description. */
const OPERATORS_ONLY = /^\/(?:metrics|docs)(?:\/|$)/i;

/** Whether admin.allowedHosts names a host other than a loopback name ('*' included). */
export function publishesName(allowedHosts: readonly string[] | undefined): boolean {
  return (allowedHosts ?? []).some((h) => !isLoopbackHost(h.trim().toLowerCase()));
}

/**
 * Whether the request names this port by a host name other than a loopback name or admin.host (the Host header, or
 * an absolute-form target's authority): a name the origin policy let through from admin.allowedHosts.
 */
function namesPublicHost(request: FastifyRequest, adminName: string | undefined): boolean {
  const named = [request.headers.host, /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(request.raw.url ?? '')?.[1]];
  return named.some((authority) => {
    if (typeof authority !== 'string') return false;
    const name = hostName(authority.slice(authority.lastIndexOf('@') + 1));
    return name !== undefined && isIP(name) === 0 && !isLoopbackHost(name) && !name.endsWith('.localhost') && name !== adminName;
  });
}

/**
 * Headers a reverse proxy or TLS terminator adds (standard and de facto): a request carrying one reached this
 * port through something in front of it, so its client may be anyone the terminator serves. Only a request's
 * sender can add one, never take one out that its proxy added, so they can only tighten the rule.
 */
const FORWARDING_HEADERS = [
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-forwarded-port',
  'x-forwarded-server',
  'x-real-ip',
  'via',
  'true-client-ip',
  'cf-connecting-ip',
  'x-client-ip',
  'x-cluster-client-ip',
  'fastly-client-ip',
];

/** Whether the request carries a header a proxy in front adds (FORWARDING_HEADERS). */
export function cameThroughProxy(headers: FastifyRequest['headers']): boolean {
  return FORWARDING_HEADERS.some((name) => headers[name] !== undefined);
}

export function buildAdminServer(deps: AdminDeps, options: AdminServerOptions): FastifyInstance {
  const token = options.token instanceof AdminToken ? options.token : new AdminToken(options.token);
  if (!token.isSet && !isLoopbackHost(options.host)) {
    throw new AdminConfigError('admin.token', `required when admin.host (${options.host}) is not a loopback address`);
  }
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    schemaController: { compilersFactory: { buildSerializer: buildLazySerializer } },
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
  const bound = boundListener(app.server, ADMIN_LIMITS);
  // A stop closes connections without a request at once: they would hold the close (src/admin/http-limits.ts).
  app.addHook('preClose', (done) => {
    bound.closing(STOP_GRACE_MS);
    done();
  });

  // Forms post text/plain without a CORS preflight; no route takes it, so no parser either (415).
  app.removeContentTypeParser('text/plain');
  const checkOrigin = createOriginPolicy({
    host: options.host,
    ...(options.allowedHosts ? { allowedHosts: options.allowedHosts } : {}),
    ...(options.allowedOrigins ? { allowedOrigins: options.allowedOrigins } : {}),
  });
  app.addHook('onRequest', async (request) => {
    const origin = request.headers.origin;
    checkOrigin({ host: request.headers.host, origin: typeof origin === 'string' ? origin : undefined, url: request.raw.url ?? '' });
  });
  const requireToken = async (request: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    if (token.check(request.headers.authorization)) return undefined;
    reply.header('www-authenticate', 'Bearer');
    return reply
      .status(401)
      .send({ error: { code: 'UNAUTHORIZED', message: request.headers.authorization ? 'bad token' : 'missing bearer token' } });
  };
  // A token and a published name (admin.allowedHosts beyond loopback: the portal behind a terminator) mean that
  // people other than operators reach this port: the metrics (customers' names, main accounts' balances) and the
  // API's description then need the token too, whatever Host a request names (a terminator may pass any). When
  // the daemon says the names are not this port's (the portal's own listener's), a request that still names one
  // of them reached this port by it, and needs the token as well; the operators' scraper asks by an address.
  // A TLS terminator on this host forwarding to a loopback admin port may name it by its address (nginx's
  // proxy_pass sends Host: 127.0.0.1:port) with no allowedHosts at all: a request carrying a forwarding header
  // (Forwarded, X-Forwarded-For, X-Real-IP, Via...) came through one and needs the token too. A terminator that
  // adds none cannot be told from a local scraper: admin.metricsToken 'always' needs the token on every request.
  const tokenSet = token.isSet;
  const always = tokenSet && options.metricsToken === 'always';
  const published = tokenSet && (always || (options.published ?? publishesName(options.allowedHosts)));
  const adminName = hostName(options.host);
  const operatorsOnly = async (request: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    if (published || namesPublicHost(request, adminName) || cameThroughProxy(request.headers)) return requireToken(request, reply);
    return undefined;
  };
  // Defence in depth: a /v1 route registered anywhere (not only in the /v1 scope below) gets the token check
  // too. routeOptions.url is the route's pattern, what the router matches against, not the raw target.
  app.addHook('onRoute', (route) => {
    const url = route.url ?? '';
    const guard = /^\/v1(?:\/|$)/i.test(url) ? requireToken : tokenSet && OPERATORS_ONLY.test(url) ? operatorsOnly : undefined;
    if (guard === undefined) return;
    const hooks = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
    route.onRequest = [guard, ...hooks];
  });
  app.addHook('onResponse', async (request, reply) => {
    request.log.debug(
      { method: request.method, route: request.routeOptions.url, status: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      'admin request',
    );
  });

  app.setErrorHandler((err, request, reply) => {
    const r = toErrorReply(err);
    // The route pattern, not the URL: a query string is the caller's and may carry anything.
    const where = {
      method: request.method,
      route: request.routeOptions.url ?? request.url.split('?')[0],
      status: r.status,
      code: r.body.error.code,
      reason: r.body.error.message,
    };
    if (r.status >= 500 && r.body.error.code === 'INTERNAL') request.log.error({ ...where, err }, 'admin route failed');
    else if (r.status >= 500) request.log.warn(where, 'admin route failed');
    else request.log.debug(where, 'admin request refused');
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
      v1.addHook('onRequest', requireToken);
      // Unknown /v1 paths are answered here, after the token: without it every /v1 answer is 401.
      v1.setNotFoundHandler((request, reply) =>
        reply.status(404).send({ error: { code: 'NOT_FOUND', message: `no route ${request.method} ${request.url.split('?')[0]}` } }),
      );
      for (const register of ROUTES) register(v1, routeDeps);
    },
    { prefix: '/v1' },
  );
  return app;
}

export { buildCallbackServer, type CallbackServerOptions } from './callback-server.ts';
