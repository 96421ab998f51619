// The customer portal's routes (docs/reference.md "Portal"), under `path` (default /portal/): the page and its
// files, and the API a signed-in customer uses — login, me, usage, connections, endpoints, regions, password,
// logout. A customer is whoever the session cookie names: no route takes a user name (or anything naming
// another customer) by path, query or body; the strict schemas refuse any extra field. Nothing here accepts
// the admin token, and nothing under /v1 accepts a portal session (the admin's /v1 checks only its bearer).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { zs } from '../admin/validation.ts';
import { timeQuery } from '../admin/routes/time-query.ts';
import type { ConnectionListQuery, UsageListQuery } from '../connlog/service.ts';
import type { ConnectionRecord, LiveConnection } from '../connlog/types.ts';
import type { UsageRow } from '../connlog/usage.ts';
import type { UserView } from '../users/record.ts';
import { HashBusyError } from '../admission/password.ts';
import { LoginBackoff, type TryOutcome } from './backoff.ts';
import { CustomerReads, SlowDownError } from './reads.ts';
import { checkPassword } from './credentials.ts';
import { HistorySplit } from './history.ts';
import { buildEndpoints, endpointQuery, renderEndpoints, type EndpointQuery, type ProxyAddress } from './endpoints.ts';
import { badCredentials, csrfRefused, LoginDelayedError, PortalError, signedOut } from './errors.ts';
import { csrfMatches, PortalSessions, type PortalSession } from './sessions.ts';
import { registerPortalPage } from './static.ts';
import { customerState } from './state.ts';

export interface PortalUsers {
  view(name: string): UserView | undefined;
  /** The stored password hash (the proxy's), undefined for an unknown user. */
  hashOf(name: string): string | undefined;
  setPassword(name: string, password: string): Promise<unknown>;
  /**
   * Since when the name's records and usage rows are this customer's (epoch ms): for a name deleted and made
   * again, the new user's creation (what came before was another customer's); 0 for the name's first user.
   */
  historySince(name: string): number | undefined;
}

export interface PortalConnections {
  list(q: ConnectionListQuery): Promise<{ items: ConnectionRecord[]; next: string | null }>;
  /** The user's open connections, oldest first, at most `max` (the others are not listed for it). */
  active(user: string, max: number): LiveConnection[];
  usage(q: UsageListQuery): Promise<UsageRow[]>;
}

export interface PortalDeps {
  users: PortalUsers;
  connections: PortalConnections;
  /** The platform's regions (GetArea), flattened: code and name. */
  regions(): Promise<{ code: string; name: string }[]>;
  /** The proxy listeners' bound addresses (host may be a wildcard: then the page's own host is named). */
  proxy(): { http: ProxyAddress; socks5: ProxyAddress };
  currency: string;
}

export interface PortalOptions {
  path: string;
  secureCookie: boolean;
  proxyHost?: string | undefined;
  sessionIdleMs: number;
  sessionMaxMs: number;
  freeFailures: number;
  maxDelayMs: number;
  /** How long connection records are kept (log.access.retentionDays); default: for good. */
  recordsRetentionMs?: number | undefined;
  now?: () => number;
}

export const COOKIE = 'rotor_portal';
export const CSRF_HEADER = 'x-rotor-csrf';
const DAY_MS = 86_400_000;

const password = z.string().min(1).max(255);
const loginBody = z.strictObject({ user: z.string().min(1).max(32), password });
const passwordBody = z.strictObject({ current: password, password: z.string().min(8, 'at least 8 characters').max(255) });
const none = z.strictObject({});
const usageQuery = z.strictObject({
  from: timeQuery.optional(),
  to: timeQuery.optional(),
  granularity: z.enum(['hour', 'day']).default('hour'),
});
const connectionsQuery = z.strictObject({ limit: z.coerce.number().int().min(1).max(200).default(50) });

/** The value of one cookie in a Cookie header (the first of that name). */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

const WILDCARD = new Set(['0.0.0.0', '::', '[::]', '']);

declare module 'fastify' {
  interface FastifyRequest {
    portalSession?: PortalSession;
  }
}

export interface PortalHandle {
  sessions: PortalSessions;
  stop(): void;
}

/** What the route groups share: the paths, the sessions, the login back-off and the request helpers. */
function portalContext(deps: PortalDeps, options: PortalOptions) {
  const base = options.path;
  const api = `${base}api`;
  const sessions = new PortalSessions({
    idleMs: options.sessionIdleMs,
    maxAgeMs: options.sessionMaxMs,
    ...(options.now ? { now: options.now } : {}),
  });
  const backoff = new LoginBackoff({
    freeFailures: options.freeFailures,
    maxDelayMs: options.maxDelayMs,
    ...(options.now ? { now: options.now } : {}),
  });
  const sweep = setInterval(() => sessions.sweep(), 60_000);
  sweep.unref();

  const cookie = (request: FastifyRequest, value: string, maxAgeS: number) =>
    [
      `${COOKIE}=${value}`,
      `Path=${base}`,
      `Max-Age=${maxAgeS}`,
      'HttpOnly',
      'SameSite=Strict',
      ...(options.secureCookie || request.protocol === 'https' ? ['Secure'] : []),
    ].join('; ');

  /** The session the cookie names, or 401; writes need the CSRF header too. */
  const signedIn = (write: boolean) => async (request: FastifyRequest) => {
    const token = cookieValue(request.headers.cookie, COOKIE);
    const session = sessions.get(token);
    // A customer deleted (also when the name was made again since, even with the same stored hash: another
    // customer), or given a new password (by the reseller, or in another browser): signed out.
    const user = session ? deps.users.view(session.user) : undefined;
    if (!session || !user || user.createdAt !== session.born || deps.users.hashOf(session.user) !== session.hash) {
      if (token && session) sessions.drop(token);
      throw signedOut();
    }
    if (write && !csrfMatches(request.headers[CSRF_HEADER], session)) throw csrfRefused();
    request.portalSession = session;
  };
  const me = (request: FastifyRequest): PortalSession => {
    const s = request.portalSession;
    if (!s) throw signedOut();
    return s;
  };

  const publicHost = (request: FastifyRequest, listenerHost: string): string => {
    if (options.proxyHost) return options.proxyHost;
    if (!WILDCARD.has(listenerHost)) return listenerHost;
    // The name the customer reached this page by (the origin policy has checked it).
    return request.hostname.replace(/:\d+$/, '') || '127.0.0.1';
  };

  return { deps, options, base, api, sessions, backoff, sweep, cookie, signedIn, me, publicHost, hide: { hide: true } };
}

type PortalContext = ReturnType<typeof portalContext>;

export function registerPortal(app: FastifyInstance, deps: PortalDeps, options: PortalOptions): PortalHandle {
  const ctx = portalContext(deps, options);
  registerPortalPage(app, ctx.base);
  registerAccountRoutes(app, ctx);
  registerDataRoutes(app, ctx);
  // Anything else under the API: the same 404 for a signed-in customer and a stranger.
  app.all(`${ctx.api}/*`, { schema: ctx.hide }, async (request) => {
    throw new PortalError(404, 'NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`);
  });

  return { sessions: ctx.sessions, stop: () => clearInterval(ctx.sweep) };
}

/** Signing in and out, the customer's own record and their password. */
function registerAccountRoutes(app: FastifyInstance, ctx: PortalContext): void {
  const { deps, options, api, sessions, backoff, cookie, signedIn, me, hide } = ctx;
  /**
   * A password check under the back-off: the try is reserved first (refused unchecked, 429 LOGIN_DELAYED, when
   * the name or the address waits or the name's free tries are all in flight; when the address's are — at most
   * 4 × freeFailures checks in flight from one address — it waits in the address's line for one to end, see
   * backoff.ts), then checked at the hash queue's 'portal' priority, then counted.
   */
  const checked = async (reply: FastifyReply, user: string, client: string, check: () => Promise<boolean>): Promise<boolean> => {
    const wait = await backoff.begin(user, client);
    if (wait > 0) {
      const seconds = Math.max(1, Math.ceil(wait / 1000));
      void reply.header('retry-after', String(seconds));
      throw new LoginDelayedError(seconds);
    }
    let outcome: TryOutcome = 'unchecked';
    try {
      const ok = await check();
      outcome = ok ? 'succeeded' : 'failed';
      return ok;
    } catch (err) {
      // Shed unchecked (too many sign-ins waiting for a hash): 503 AUTH_BUSY, try again shortly; not a failure.
      if (err instanceof HashBusyError) void reply.header('retry-after', '1');
      throw err;
    } finally {
      backoff.end(user, client, outcome);
    }
  };
  app.post<{ Body: z.output<typeof loginBody> }>(`${api}/login`, { schema: { ...hide, body: zs(loginBody) } }, async (request, reply) => {
    const { user, password: given } = request.body;
    const hash = deps.users.hashOf(user);
    // The customer the hash is of (a name deleted and made again meanwhile is another: its sessions end at once).
    const born = deps.users.view(user)?.createdAt ?? '';
    if (!(await checked(reply, user, request.ip, () => checkPassword(given, hash)))) throw badCredentials();
    const { token, session } = sessions.create(user, given, hash, born);
    void reply.header('set-cookie', cookie(request, token, Math.floor(options.sessionMaxMs / 1000)));
    void reply.header(CSRF_HEADER, session.csrf);
    return reply.code(204).send();
  });

  app.post(`${api}/logout`, { schema: { ...hide, body: zs(none.optional()) }, onRequest: signedIn(true) }, async (request, reply) => {
    const token = cookieValue(request.headers.cookie, COOKIE);
    if (token) sessions.drop(token);
    void reply.header('set-cookie', cookie(request, '', 0));
    return reply.code(204).send();
  });

  app.get(`${api}/me`, { schema: { ...hide, querystring: zs(none) }, onRequest: signedIn(false) }, async (request, reply) => {
    const s = me(request);
    const u = deps.users.view(s.user);
    if (!u) throw signedOut();
    void reply.header(CSRF_HEADER, s.csrf);
    void reply.header('cache-control', 'no-store');
    return {
      name: u.name,
      usedBytes: u.usedBytes,
      limitBytes: u.limitBytes,
      quota: u.quota,
      periodKey: u.periodKey,
      expiresAt: u.expiresAt,
      enabled: u.enabled,
      state: customerState(u, Date.now()),
      rateBytesPerSec: u.rateBytesPerSec,
      maxConnections: u.maxConnections,
      activeConnections: u.activeConnections,
      sessTime: u.sessTime,
      pricePerGb: u.pricePerGb,
      currency: deps.currency,
      listen: u.listen ? { port: u.listen.port, allowIps: u.listen.allowIps, ...(u.listen.tls === true ? { tls: true } : {}) } : null,
    };
  });

  app.post<{ Body: z.output<typeof passwordBody> }>(
    `${api}/password`,
    { schema: { ...hide, body: zs(passwordBody) }, onRequest: signedIn(true) },
    async (request, reply) => {
      const s = me(request);
      const hash = deps.users.hashOf(s.user);
      if (!(await checked(reply, s.user, request.ip, () => checkPassword(request.body.current, hash))))
        throw new PortalError(401, 'BAD_CREDENTIALS', 'the current password is wrong');
      await deps.users.setPassword(s.user, request.body.password);
      // Every other session of this customer ends; this one goes on with the new password.
      sessions.dropUser(s.user, s);
      s.password = request.body.password;
      s.hash = deps.users.hashOf(s.user) ?? '';
      return reply.code(204).send();
    },
  );
}

/** Usage, connections, endpoints and regions: what a signed-in customer reads. */
function registerDataRoutes(app: FastifyInstance, ctx: PortalContext): void {
  const { deps, api, signedIn, me, publicHost, hide } = ctx;
  const history = new HistorySplit((q) => deps.connections.list(q), ctx.options.now, ctx.options.recordsRetentionMs);
  // Each customer's store reads are bounded (reads.ts): past its bucket 429 SLOW_DOWN with Retry-After.
  const reads = new CustomerReads(ctx.options.now ? { now: ctx.options.now } : {});
  const bounded = async <T>(reply: FastifyReply, user: string, key: string, load: () => Promise<T>, keep = false): Promise<T> => {
    try {
      return await reads.read(user, key, load, keep);
    } catch (err) {
      if (err instanceof SlowDownError) void reply.header('retry-after', String(err.retryAfterSeconds));
      throw err;
    }
  };
  app.get<{ Querystring: z.output<typeof usageQuery> }>(
    `${api}/usage`,
    { schema: { ...hide, querystring: zs(usageQuery) }, onRequest: signedIn(false) },
    async (request, reply) => {
      const s = me(request);
      const to = request.query.to ?? Date.now();
      const from = request.query.from ?? to - (request.query.granularity === 'hour' ? 2 * DAY_MS : 30 * DAY_MS);
      if (!(from < to) || to - from > 400 * DAY_MS)
        throw new PortalError(400, 'INVALID_INPUT', 'query.from: must be before to, at most 400 days apart');
      const granularity = request.query.granularity;
      // A name made again: only this customer's part of the rows (src/portal/history.ts).
      const since = deps.users.historySince(s.user) ?? 0;
      const own = await bounded(reply, s.user, `usage ${from} ${to} ${granularity} ${since}`, async () => {
        const rows = await deps.connections.usage({ from, to, granularity, user: s.user });
        return history.own(
          s.user,
          since,
          granularity,
          rows.filter((r) => r.user === s.user),
        );
      });
      return own.map((r) => ({
        period: r.period,
        bytesUp: r.bytesUp,
        bytesDown: r.bytesDown,
        connections: r.connections,
        failures: r.failures,
        amount: r.amount,
      }));
    },
  );

  const connectionView = (c: LiveConnection | ConnectionRecord) => ({
    id: c.id,
    session: c.session,
    listener: c.listener,
    target: c.target,
    exit: c.exit,
    bytesUp: c.bytesUp,
    bytesDown: c.bytesDown,
    startedAt: c.startedAt,
    durationMs: c.durationMs,
    ...('result' in c ? { result: c.result, reason: c.reason } : {}),
  });
  app.get<{ Querystring: z.output<typeof connectionsQuery> }>(
    `${api}/connections`,
    { schema: { ...hide, querystring: zs(connectionsQuery) }, onRequest: signedIn(false) },
    async (request, reply) => {
      const s = me(request);
      // A name made again: only what this customer did (records that started from its creation on).
      const since = deps.users.historySince(s.user) ?? 0;
      const limit = request.query.limit;
      // The page polls this every 5 s: the store's answer is kept a few seconds for the next poll (reads.ts).
      const recent = await bounded(
        reply,
        s.user,
        `connections ${limit} ${since}`,
        () => deps.connections.list({ user: s.user, limit, ...(since > 0 ? { since } : {}) }),
        true,
      );
      return {
        live: deps.connections
          .active(s.user, 200)
          .filter((c) => c.user === s.user && c.startedAt >= since)
          .map(connectionView),
        recent: recent.items.filter((c) => c.user === s.user && c.startedAt >= since).map(connectionView),
      };
    },
  );

  app.get<{ Querystring: EndpointQuery }>(
    `${api}/endpoints`,
    { schema: { ...hide, querystring: zs(endpointQuery) }, onRequest: signedIn(false) },
    async (request, reply) => {
      const s = me(request);
      const q = request.query;
      const listener = deps.proxy()[q.protocol];
      const address = { host: publicHost(request, listener.host), port: listener.port };
      const list = buildEndpoints(s.user, s.password, address, q);
      void reply.header('cache-control', 'no-store');
      if (q.format === 'json') return { endpoints: list };
      void reply.header('content-type', q.format === 'csv' ? 'text/csv; charset=utf-8' : 'text/plain; charset=utf-8');
      void reply.header('content-disposition', `attachment; filename="${s.user}-endpoints.${q.format}"`);
      return reply.serializer((body: unknown) => body as string).send(renderEndpoints(list, q.format, q.style));
    },
  );

  app.get(`${api}/regions`, { schema: { ...hide, querystring: zs(none) }, onRequest: signedIn(false) }, async () => deps.regions());
}

/** For the reseller's page of a customer (GET /v1/users/:name/endpoints): the same lines, password unknown. */
export function adminEndpoints(
  deps: Pick<PortalDeps, 'proxy'>,
  proxyHost: string | undefined,
  name: string,
  q: EndpointQuery,
  requestHost: string,
) {
  const listener = deps.proxy()[q.protocol];
  const host = proxyHost ?? (WILDCARD.has(listener.host) ? requestHost.replace(/:\d+$/, '') : listener.host);
  return buildEndpoints(name, 'PASSWORD', { host, port: listener.port }, q);
}

export type { PortalSession };
