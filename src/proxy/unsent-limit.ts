// How much a client that stops reading can make Rotor read from the upstream. Rotor stops reading the
// upstream once its own write queue to the client is full, but the kernel takes writes into the socket's send
// buffer first, and on Linux that buffer autotunes up to net.ipv4.tcp_wmem's maximum (4 MiB by default): every
// byte of it was read from the upstream, and the platform charges it, for a client that never takes it.
// TCP_NOTSENT_LOWAT bounds what the kernel holds not yet sent, without fixing the buffer's size (so a client
// that reads keeps the kernel's autotuned throughput). Node has no setsockopt; `sockopt` (N-API) provides it.
//
// The bound costs a client that reads fast: every write then meets it (the kernel sends at once, in the
// writer's time), ~0.3 ms of CPU per MiB on a bulk tunnel, about a third of the relay's. So a tunnel's client
// that has taken a bulk download (unsentBulk: more than it could hold unread) gets BULK_UNSENT while it keeps
// draining, and the bound again at the first write it does not take at once (the relay's, relay.ts): what a
// client that stops reading leaves read is at most BULK_UNSENT, once, and the bound from then on.
import type { Server, Socket } from 'node:net';
import { sockoptBinding, type SockOpt } from './socket-options.ts';

/** What an accepted socket knows of where it was accepted (node sets `server` on every socket a net.Server accepts). */
interface Accepted {
  server?: (Server & { _handle?: object | null }) | null;
}

const IPPROTO_TCP = 6;
/** The bound while a client keeps taking a bulk download (measured: 1 MiB costs what no bound costs). */
export const BULK_UNSENT = 1024 * 1024;

/** What bounds a socket: the bound set on it or on its listener, and how to set it again. */
interface Bound {
  lib: SockOpt;
  option: number;
  bytes: number;
}

/** Bounds by listening handle (their sockets inherit it) or by socket (set on its own). */
const bounds = new WeakMap<object, Bound>();
/** TCP_NOTSENT_LOWAT by platform (Linux 25, macOS 0x201); elsewhere the kernel's default stays. */
const NOTSENT_LOWAT: Partial<Record<NodeJS.Platform, number>> = { linux: 25, darwin: 0x201 };

/**
 * A function that bounds the unsent bytes the kernel may hold for one socket, or undefined when `bytes` is 0
 * or this platform cannot (then `why` says so, for one log line at start).
 */
export function unsentLimiter(bytes: number): { limit?: (socket: Socket) => void; why?: string } {
  if (bytes <= 0) return {};
  const option = NOTSENT_LOWAT[process.platform];
  if (option === undefined) return { why: `TCP_NOTSENT_LOWAT is not known on ${process.platform}` };
  const lib = sockoptBinding();
  if (!lib) return { why: 'the sockopt module could not be loaded' };
  // Listening sockets (by their handle: a server that listens again has a new one) that carry the bound: Linux
  // and macOS copy a listener's TCP options into each socket it accepts, so from its second client on a
  // listener's sockets need no call of their own (a native call per connection, measurable per tunnel).
  const listeners = new WeakSet<object>();
  const bound: Bound = { lib, option, bytes };
  return {
    limit(socket: Socket): void {
      const server = (socket as Accepted).server;
      const handle = server?._handle;
      if (handle && listeners.has(handle)) return;
      try {
        lib.setsockopt(socket, IPPROTO_TCP, option, bytes);
        bounds.set(socket, bound);
      } catch {
        // A socket already closed (no handle) or not TCP: nothing is buffered for it.
      }
      if (!handle) return;
      try {
        lib.setsockopt(server, IPPROTO_TCP, option, bytes);
        listeners.add(handle);
        bounds.set(handle, bound);
      } catch {
        // Not a TCP listener (a pipe): each of its sockets keeps being set on its own.
      }
    },
  };
}

/**
 * A bounded client socket that takes a bulk download (`bulk` true) gets BULK_UNSENT, and its bound again
 * (false). Nothing for a socket without a bound, or with one above BULK_UNSENT.
 */
export function unsentBulk(socket: Socket, bulk: boolean): void {
  const b = bounds.get(socket) ?? bounds.get((socket as Accepted).server?._handle ?? socket);
  if (b === undefined || b.bytes >= BULK_UNSENT) return;
  try {
    b.lib.setsockopt(socket, IPPROTO_TCP, b.option, bulk ? BULK_UNSENT : b.bytes);
  } catch {
    // Closed meanwhile: nothing is buffered for it.
  }
}
