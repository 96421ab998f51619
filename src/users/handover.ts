// The hand-over of a socket accepted on a user's own port to the listener that speaks its protocol, told by
// the first byte: 0x05 is a SOCKS5 greeting, anything else is taken for HTTP (a request line or CONNECT).
// This is the one place that knows how a listener takes a socket it did not accept: each listener's
// handleSocket() (the HTTP listener hands it to its node:http server's parser, the SOCKS5 listener runs its
// handshake); the first chunk is pushed back (unshift) so the listener reads the stream from its start.
import type { Socket } from 'node:net';

/** A listener that can serve a socket accepted elsewhere (src/proxy/http.ts, src/proxy/socks5.ts). */
export interface SocketTaker {
  handleSocket(socket: Socket): void;
}

export interface HandoverTargets {
  http: SocketTaker;
  socks5: SocketTaker;
}

const SOCKS_VERSION = 0x05;

/**
 * Waits for the client's first bytes (at most `timeoutMs`, then closes it), then hands the socket over with
 * those bytes unread. `onHanded` runs just before, with the protocol chosen.
 */
export function sniffAndHandOver(
  socket: Socket,
  to: HandoverTargets,
  timeoutMs: number,
  onHanded?: (protocol: 'http' | 'socks5') => void,
): void {
  const timer = setTimeout(() => socket.destroy(), timeoutMs);
  timer.unref();
  const gone = (): void => {
    clearTimeout(timer);
    socket.off('data', first);
  };
  const first = (chunk: Buffer): void => {
    clearTimeout(timer);
    socket.off('close', gone);
    socket.pause();
    socket.unshift(chunk);
    const protocol = chunk[0] === SOCKS_VERSION ? 'socks5' : 'http';
    onHanded?.(protocol);
    to[protocol].handleSocket(socket);
    // node:http reads through its own 'data' listener once attached; a paused socket would never deliver.
    socket.resume();
  };
  socket.once('data', first);
  socket.once('close', gone);
}
