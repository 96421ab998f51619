// Bounds on what an HTTP listener of the daemon's other than the proxy's holds (the admin API, the platform's
// callbacks, the portal's own listener). Every socket is one of the process's descriptors, shared with every
// tunnel, and node's and fastify's defaults hold a connection that never sends a byte forever (no request
// deadline, so no head deadline either) with no cap: enough of them leave the proxy no descriptor. Here: a request
// head must come whole within `headersMs` (a silent socket included: node checks every second), a request body
// within `requestMs`, a kept-alive socket is closed after `keepAliveMs` between requests, one with no byte either way
// for `idleMs` (0 = never: the admin API's bulk imports are quiet for minutes while they hash), and past
// `perAddress` connections from one client address or `total` in all a new one is closed at once, unread.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export interface ListenerLimits {
  headersMs: number;
  requestMs: number;
  keepAliveMs: number;
  /** Closes a connection without a byte either way for this long, a request in flight included; 0 = never. */
  idleMs: number;
  perAddress: number;
  total: number;
}

/** The admin API: operators, their scrapers, the dashboard; behind a terminator they all come from one address. */
export const ADMIN_LIMITS: ListenerLimits = {
  headersMs: 10_000,
  requestMs: 60_000,
  keepAliveMs: 10_000,
  idleMs: 0,
  perAddress: 512,
  total: 1024,
};

/** The platform's callbacks (one quick GET each, often through one balancer). */
export const CALLBACK_LIMITS: ListenerLimits = {
  headersMs: 10_000,
  requestMs: 30_000,
  keepAliveMs: 10_000,
  idleMs: 30_000,
  perAddress: 256,
  total: 256,
};

/** Sets the deadlines and the caps on `server` (before it listens). */
export function boundListener(server: Server, limits: ListenerLimits): void {
  server.requestTimeout = limits.requestMs;
  server.headersTimeout = Math.min(limits.headersMs, limits.requestMs);
  server.keepAliveTimeout = limits.keepAliveMs;
  if (limits.idleMs > 0) server.setTimeout(limits.idleMs);
  // Node checks the head and request deadlines this often (30 s by default); read when the server starts listening.
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.min(limits.headersMs, 1000);
  server.maxConnections = limits.total;
  const byAddress = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const n = byAddress.get(address) ?? 0;
    if (n >= limits.perAddress) {
      socket.destroy();
      return;
    }
    byAddress.set(address, n + 1);
    socket.once('close', () => {
      const left = (byAddress.get(address) ?? 1) - 1;
      if (left <= 0) byAddress.delete(address);
      else byAddress.set(address, left);
    });
  });
}
