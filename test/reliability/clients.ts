// Minimal proxy clients over raw sockets (SOCKS5 with RFC 1929, HTTP CONNECT with Basic), shared by the
// fault tests and the soak: open a tunnel to a loopback echo target and prove it carries bytes.
import { connect, type Socket } from 'node:net';

export type ProxyKind = 'socks5' | 'http';

export interface Tunnel {
  socket: Socket;
  /** ms from connect() to the tunnel being usable */
  ms: number;
}

export class TunnelError extends Error {
  constructor(
    readonly kind: string,
    message: string,
  ) {
    super(message);
    this.name = 'TunnelError';
  }
}

function socksRequest(user: string, pass: string, port: number): Buffer {
  const u = Buffer.from(user);
  const p = Buffer.from(pass);
  return Buffer.concat([
    Buffer.from([5, 1, 2]),
    Buffer.from([1, u.length]),
    u,
    Buffer.from([p.length]),
    p,
    Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, port >> 8, port & 0xff]),
  ]);
}

/**
 * Opens a tunnel through the proxy at `proxyPort` to 127.0.0.1:`targetPort`. Rejects with a TunnelError whose
 * `kind` says what went wrong (refused, reply code, status, timeout, closed).
 */
export function openTunnel(
  kind: ProxyKind,
  proxyPort: number,
  user: string,
  pass: string,
  targetPort: number,
  timeoutMs = 15_000,
): Promise<Tunnel> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: proxyPort });
    let buf = Buffer.alloc(0);
    let done = false;
    const fail = (k: string, message: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      reject(new TunnelError(k, message));
    };
    const timer = setTimeout(() => fail('timeout', `no tunnel within ${timeoutMs} ms`), timeoutMs);
    const ok = (rest: Buffer): void => {
      done = true;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.removeAllListeners('close');
      if (rest.length > 0) socket.unshift(rest);
      resolve({ socket, ms: performance.now() - started });
    };
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      if (kind === 'socks5') {
        if (buf.length < 4) return;
        if (buf[1] !== 2) return fail('socks_method', `method ${buf[1]}`);
        if (buf[3] !== 0) return fail('socks_auth', `auth status ${buf[3]}`);
        if (buf.length < 14) return;
        if (buf[5] !== 0) return fail(`socks_reply_${buf[5]}`, `reply ${buf[5]}`);
        ok(buf.subarray(14));
      } else {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const status = buf.subarray(9, 12).toString();
        if (status !== '200') return fail(`http_${status}`, buf.subarray(0, end).toString());
        ok(buf.subarray(end + 4));
      }
    };
    socket.on('data', onData);
    socket.on('error', (err: NodeJS.ErrnoException) => fail(err.code ?? 'error', err.message));
    socket.on('close', () => fail('closed', 'closed before the tunnel was up'));
    socket.on('connect', () => {
      socket.setNoDelay(true);
      if (kind === 'socks5') socket.write(socksRequest(user, pass, targetPort));
      else
        socket.write(
          `CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\n` +
            `Proxy-Authorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}\r\n\r\n`,
        );
    });
  });
}

/** Writes `payload` and resolves once it has all come back (the target echoes). */
export function echoRound(socket: Socket, payload: Buffer, timeoutMs = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let got = 0;
    const timer = setTimeout(() => finish(new TunnelError('echo_timeout', `echo incomplete: ${got}/${payload.length}`)), timeoutMs);
    const onData = (d: Buffer): void => {
      got += d.length;
      if (got >= payload.length) finish();
    };
    const onClose = (): void => finish(new TunnelError('echo_closed', `tunnel closed after ${got}/${payload.length} bytes`));
    const finish = (err?: Error): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.off('error', onClose);
      if (err) reject(err);
      else resolve();
    };
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.once('error', onClose);
    socket.write(payload);
  });
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
