// How much a client that stops reading can make Rotor read from the upstream. Rotor stops reading the
// upstream once its own write queue to the client is full, but the kernel takes writes into the socket's send
// buffer first, and on Linux that buffer autotunes up to net.ipv4.tcp_wmem's maximum (4 MiB by default): every
// byte of it was read from the upstream, and the platform charges it, for a client that never takes it.
// TCP_NOTSENT_LOWAT bounds what the kernel holds not yet sent, without fixing the buffer's size (so a client
// that reads keeps the kernel's autotuned throughput). Node has no setsockopt; `sockopt` (N-API) provides it.
import type { Server, Socket } from 'node:net';
import { sockoptBinding } from './socket-options.ts';

/** What an accepted socket knows of where it was accepted (node sets `server` on every socket a net.Server accepts). */
interface Accepted {
  server?: (Server & { _handle?: object | null }) | null;
}

const IPPROTO_TCP = 6;
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
  return {
    limit(socket: Socket): void {
      const server = (socket as Accepted).server;
      const handle = server?._handle;
      if (handle && listeners.has(handle)) return;
      try {
        lib.setsockopt(socket, IPPROTO_TCP, option, bytes);
      } catch {
        // A socket already closed (no handle) or not TCP: nothing is buffered for it.
      }
      if (!handle) return;
      try {
        lib.setsockopt(server, IPPROTO_TCP, option, bytes);
        listeners.add(handle);
      } catch {
        // Not a TCP listener (a pipe): each of its sockets keeps being set on its own.
      }
    },
  };
}
