// The portal put together from the daemon's parts: on the admin listener under `portal.path`, or on its own
// listener (portal.host/port, over TLS with portal.tls). It also adds the reseller's side of the access
// generator to the admin API: GET /v1/users/:name/endpoints (the admin token, as every /v1 route).
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import { readFileSync } from 'node:fs';
import { toErrorReply } from '../admin/errors.ts';
import { boundListener, STOP_GRACE_MS, type ListenerLimits } from '../admin/http-limits.ts';
import { createOriginPolicy } from '../admin/origin.ts';
import { doc } from '../admin/routes/common.ts';
import { zodValidatorCompiler, zs } from '../admin/validation.ts';
import type { Config } from '../config/schema.ts';
import type { AreaNode } from '../platform/schemas.ts';
import { userName } from '../users/record.ts';
import { z } from 'zod';
import { endpointQuery, renderEndpoints, type EndpointQuery, type ProxyAddress } from './endpoints.ts';
import { adminEndpoints, registerPortal, type PortalConnections, type PortalHandle, type PortalUsers } from './routes.ts';
import { PortalError } from './errors.ts';

export interface PortalWiring {
  config: Config['portal'];
  admin: FastifyInstance;
  /** config admin: the own listener's Host/Origin policy takes its allowed hosts and origins. */
  adminConfig: Pick<Config['admin'], 'allowedHosts' | 'allowedOrigins'>;
  users: PortalUsers;
  connections: PortalConnections;
  areas(): Promise<AreaNode[]>;
  proxy(): { http: ProxyAddress; socks5: ProxyAddress };
  currency: string;
  /** How long connection records are kept (log.access.retentionDays, in ms). */
  recordsRetentionMs?: number;
  logger: FastifyBaseLogger;
}

/**
 * The portal's own listener faces anyone who can reach it (admin/http-limits.ts): a socket idle (no byte either
 * way) for 30 s is closed, also one in the middle of a request (a sign-in waits at most ~10 s in its address's
 * line, then one hash); a kept-alive one after 10 s between requests (the page polls every 5 s); a request head
 * within 10 s, a request within 30 s; at most 32 connections per client address (a browser opens 6 per host)
 * and 1,024 in all.
 */
export const PORTAL_LIMITS: ListenerLimits = {
  headersMs: 10_000,
  requestMs: 30_000,
  keepAliveMs: 10_000,
  idleMs: 30_000,
  perAddress: 32,
  total: 1024,
};

export interface RunningPortal {
  handle: PortalHandle | undefined;
  /** The portal's own listener's port, when it has one. */
  port: number | undefined;
  close(): Promise<void>;
}

function flatten(
  nodes: readonly AreaNode[] | undefined,
  out: { code: string; name: string }[] = [],
  depth = 0,
): { code: string; name: string }[] {
  for (const n of nodes ?? []) {
    if (out.length >= 5000) break;
    out.push({ code: n.code, name: `${'  '.repeat(depth)}${n.name ?? n.cname ?? n.code}` });
    flatten(n.children ?? undefined, out, depth + 1);
  }
  return out;
}

/** Registers the admin route and the portal (call before the admin server listens). */
export async function startPortal(w: PortalWiring): Promise<RunningPortal> {
  const c = w.config;
  const nameParams = zs(z.strictObject({ name: userName }));
  // In a plugin of its own: a route added straight on the root instance here comes before @fastify/swagger has
  // loaded, and would be served but missing from GET /docs/json (review17 #9).
  void w.admin.register(async (scope) => {
    scope.get<{ Params: { name: string }; Querystring: EndpointQuery }>(
      '/v1/users/:name/endpoints',
      {
        schema: {
          operationId: 'userEndpoints',
          params: nameParams,
          querystring: zs(endpointQuery),
          ...doc(
            'users',
            "a user's proxy endpoints (the access generator): URL, host:port:user:pass, curl, Python; the password shows as PASSWORD; format=json|txt|csv",
            {
              200: { type: 'object', additionalProperties: true },
            },
          ),
        },
      },
      async (request, reply) => {
        if (!w.users.view(request.params.name)) throw new PortalError(404, 'UNKNOWN_USER', `unknown user ${request.params.name}`);
        const q = request.query;
        const list = adminEndpoints(w, c.proxyHost, request.params.name, q, request.hostname);
        if (q.format === 'json') return reply.serializer(JSON.stringify).send({ endpoints: list });
        void reply.header('content-type', q.format === 'csv' ? 'text/csv; charset=utf-8' : 'text/plain; charset=utf-8');
        void reply.header('content-disposition', `attachment; filename="${request.params.name}-endpoints.${q.format}"`);
        return reply.serializer((body: unknown) => body as string).send(renderEndpoints(list, q.format, q.style));
      },
    );
  });
  if (!c.enabled) return { handle: undefined, port: undefined, close: async () => {} };

  const deps = {
    users: w.users,
    connections: w.connections,
    regions: async () => flatten(await w.areas()),
    proxy: w.proxy,
    currency: w.currency,
  };
  const options = {
    path: c.path,
    secureCookie: c.secureCookie || c.tls !== undefined,
    proxyHost: c.proxyHost,
    sessionIdleMs: c.sessionIdleMinutes * 60_000,
    sessionMaxMs: c.sessionMaxHours * 3_600_000,
    freeFailures: c.login.freeFailures,
    maxDelayMs: c.login.maxDelaySeconds * 1000,
    recordsRetentionMs: w.recordsRetentionMs,
  };
  if (c.host === undefined || c.port === undefined) {
    const handle = registerPortal(w.admin, deps, options);
    return { handle, port: undefined, close: async () => handle.stop() };
  }

  // Its own listener: only the portal answers there (no /v1, no dashboard).
  const limits = PORTAL_LIMITS;
  const app = Fastify({
    logger: false,
    bodyLimit: 16 * 1024,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 256 },
    // A TLS handshake not done within the head's deadline is dropped too (node's default waits 120 s).
    ...(c.tls ? { https: { cert: readFileSync(c.tls.cert), key: readFileSync(c.tls.key), handshakeTimeout: limits.headersMs } } : {}),
    frameworkErrors: (err: FastifyError, _request: unknown, reply: FastifyReply) => {
      const r = toErrorReply(err);
      void reply.status(r.status).send(r.body);
    },
  } as Parameters<typeof Fastify>[0]) as unknown as FastifyInstance;
  app.setValidatorCompiler(zodValidatorCompiler);
  app.removeContentTypeParser('text/plain');
  const checkOrigin = createOriginPolicy({
    host: c.host,
    allowedHosts: w.adminConfig.allowedHosts,
    allowedOrigins: w.adminConfig.allowedOrigins,
  });
  app.addHook('onRequest', async (request) => {
    const origin = request.headers.origin;
    checkOrigin({ host: request.headers.host, origin: typeof origin === 'string' ? origin : undefined, url: request.raw.url ?? '' });
  });
  app.setErrorHandler((err, _request, reply) => {
    const r = toErrorReply(err);
    return reply.status(r.status).send(r.body);
  });
  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send({ error: { code: 'NOT_FOUND', message: `no route ${request.method} ${request.url.split('?')[0]}` } }),
  );
  const handle = registerPortal(app, deps, options);
  const bound = boundListener(app.server, limits);
  // A stop closes connections without a request at once: they would hold the close (src/admin/http-limits.ts).
  app.addHook('preClose', (done) => {
    bound.closing(STOP_GRACE_MS);
    done();
  });
  await app.listen({ host: c.host, port: c.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : c.port;
  w.logger.info({ port, path: c.path, tls: c.tls !== undefined }, 'customer portal listening');
  return {
    handle,
    port,
    close: async () => {
      handle.stop();
      await app.close();
    },
  };
}
