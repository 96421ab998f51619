// TCP_NODELAY for accepted client sockets, set once on the listening socket instead of once per connection:
// Linux copies a listener's TCP options into each socket it accepts (TCP_NOTSENT_LOWAT rides the same way,
// unsent-limit.ts), so a listener that carries it needs no setsockopt per client. It is set as the listener
// starts listening, before any client can be accepted; a socket from any other listener (one that could not
// carry it, or on another platform) is set on its own as before.
import type { Server, Socket } from 'node:net';
import { sockoptBinding } from './socket-options.ts';

const IPPROTO_TCP = 6;
const TCP_NODELAY = 1;

/** Listening handles that carry TCP_NODELAY (a server that listens again has a new handle). */
const carrying = new WeakSet<object>();

/** What an accepted socket knows of where it was accepted (node sets `server` on every socket a net.Server accepts). */
interface Accepted {
  server?: (Server & { _handle?: object | null }) | null;
}

/** Sets TCP_NODELAY on a listening server's socket (Linux), so that the sockets it accepts have it already. */
export function listenWithNoDelay(server: Server): void {
  if (process.platform !== 'linux') return;
  const handle = (server as Accepted['server'] & object)._handle;
  const lib = sockoptBinding();
  if (!handle || !lib) return;
  try {
    lib.setsockopt(server, IPPROTO_TCP, TCP_NODELAY, 1);
    carrying.add(handle);
  } catch {
    // Not a TCP listener (a pipe): its sockets are set one by one.
  }
}

/** No Nagle delay on an accepted socket: inherited from its listener when that carries it, else set now. */
export function noDelay(socket: Socket): void {
  const handle = (socket as Accepted).server?._handle;
  if (handle && carrying.has(handle)) return;
  socket.setNoDelay(true);
}
