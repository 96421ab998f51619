// Bounds on what an HTTP listener of the daemon's other than the proxy's holds (the admin API, the platform's
// callbacks, the portal's own listener). Every socket is one of the process's descriptors, shared with every
// tunnel, and node's and fastify's defaults hold a connection that never sends a byte forever (no request
// deadline, so no head deadline either) with no cap: enough of them leave the proxy no descriptor. Here: a request
// head must come whole within `headersMs` (a silent socket included: node checks every second), a request body
// within `requestMs`, a kept-alive socket is closed after `keepAliveMs` between requests, one with no byte either way
// for `idleMs` (0 = never: the admin API's bulk imports are quiet for minutes while they hash), and past
// `perAddress` connections from one client address or `total` in all the oldest one without a request in flight
// makes room (boundListener below). Together, the listeners bounded here hold at most the process's budget for
// them (src/errors/descriptor-budget.ts: an eighth of the soft descriptor limit, at least 32), so that a flood on
// these ports cannot leave the customers' tunnels without descriptors.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { sideDescriptors, type DescriptorBudget } from '../errors/descriptor-budget.ts';

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

/**
 * Sets the deadlines and the caps on `server` (before it listens). At a cap (the client's address's, or the
 * listener's total) the new connection is not refused while an older one holds no request in flight (silent, a
 * head still coming, or kept alive between requests): the oldest such one is closed instead. So sockets that never
 * finish a request cannot lock operators, the platform or customers out; only connections all busy answering
 * requests make a newcomer wait.
 */
/** What a bounded listener offers its owner at a stop. */
export interface BoundListener {
  /**
   * Called as the server's close begins: node stops its head deadline then and closes only connections kept alive
   * between requests, so a socket that never sent a head would hold the close (and the daemon's stop) for as long
   * as its client likes. Every connection without a request in flight is closed now, one with a request once its
   * answer is written, and whatever is left after `graceMs`.
   */
  closing(graceMs: number): void;
}

/** How long a request in flight at a stop may take to be answered before its connection is cut. */
export const STOP_GRACE_MS = 1000;

export function boundListener(server: Server, limits: ListenerLimits, budget: DescriptorBudget = sideDescriptors): BoundListener {
  server.requestTimeout = limits.requestMs;
  server.headersTimeout = Math.min(limits.headersMs, limits.requestMs);
  server.keepAliveTimeout = limits.keepAliveMs;
  if (limits.idleMs > 0) server.setTimeout(limits.idleMs);
  // Node checks the head and request deadlines this often (30 s by default); read when the server starts listening.
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.min(limits.headersMs, 1000);
  // Requests in flight per connection; a Map keeps the order the connections came in, oldest first.
  const open = new Map<Socket, { address: string; requests: number }>();
  const byAddress = new Map<string, Set<Socket>>();
  const shedFrom = (sockets: Iterable<Socket>): boolean => {
    for (const socket of sockets) {
      if (open.get(socket)?.requests !== 0) continue;
      forget(socket);
      socket.destroy();
      return true;
    }
    return false;
  };
  const forget = (socket: Socket): void => {
    const state = open.get(socket);
    if (!state) return;
    open.delete(socket);
    budget.give();
    const mine = byAddress.get(state.address);
    mine?.delete(socket);
    if (mine?.size === 0) byAddress.delete(state.address);
  };
  const me = { held: () => open.size, shedIdle: () => shedFrom(open.keys()) };
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    let mine = byAddress.get(address);
    if (
      (mine !== undefined && mine.size >= limits.perAddress && !shedFrom(mine)) ||
      (open.size >= limits.total && !shedFrom(open.keys()))
    ) {
      socket.destroy();
      return;
    }
    // The process's budget for these listeners: past it, the oldest idle connection of the fullest one goes.
    if (!budget.take(me)) {
      socket.destroy();
      return;
    }
    // Read again: the connection closed for this one may have been its address's last.
    mine = byAddress.get(address);
    if (mine === undefined) byAddress.set(address, (mine = new Set()));
    mine.add(socket);
    open.set(socket, { address, requests: 0 });
    socket.once('close', () => forget(socket));
  });
  server.once('close', budget.register(me));
  let stopping = false;
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    // Behind TLS the request's socket is the TLSSocket over the connection's own (its _parent).
    const socket = request.socket as Socket & { _parent?: Socket };
    const state = open.get(socket) ?? (socket._parent ? open.get(socket._parent) : undefined);
    if (!state) return;
    state.requests++;
    response.once('close', () => {
      state.requests--;
      // At a stop the answer is written and the connection ends (end, not destroy: the answer's bytes go first).
      if (stopping && state.requests === 0) socket.end();
    });
  });
  return {
    closing(graceMs: number): void {
      if (stopping) return;
      stopping = true;
      for (const [socket, state] of open) if (state.requests === 0) socket.destroy();
      if (open.size === 0) return;
      setTimeout(() => {
        for (const socket of open.keys()) socket.destroy();
      }, graceMs).unref();
    },
  };
}
