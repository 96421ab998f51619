// One upstream listening port: tracks its connections, applies fault knobs, tells SOCKS5 from HTTP by the
// first byte, and asks its admission policy who may relay through which exit.
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { acceptSocks5, REPLY, writeReply, type ConnectRequest, type ReplyCode } from '../../wire/socks5.ts';
import type { Fault, Meter, Refusal } from '../contracts.ts';
import { UpstreamError } from './errors.ts';
import { basicCredentials, ClosingHeads, HttpHeadError, readRequestHead, type RequestHead } from './http-head.ts';
import { dial, relay } from './relay.ts';
import { serveUdpAssociate } from './udp.ts';

export type Admission = { ok: true; meter: Meter; exit: string } | { ok: false; reason: string; refusal: Refusal };

export interface AdmissionPolicy {
  /** 'password': SOCKS5 RFC 1929 and HTTP Basic are required; 'none': admitted by the client's address */
  auth: 'password' | 'none';
  admit(who: { username: string; password: string; clientIp: string }): Admission;
}

export interface PortTimeouts {
  /** first byte, SOCKS5 handshake, HTTP request head */
  handshakeMs: number;
  connectMs: number;
}

const REALM = 'Proxy-Authenticate: Basic realm="rotor-sim"\r\n';
const ESTABLISHED = Buffer.from('HTTP/1.1 200 Connection Established\r\n\r\n');
const HOP_BY_HOP = new Set(['proxy-authorization', 'proxy-connection', 'connection', 'keep-alive']);

function noop(): void {}

export function clientAddress(socket: Socket): string {
  const address = socket.remoteAddress ?? '';
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

export class UpstreamPort {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private closed = false;
  port = 0;
  /** UDP ASSOCIATE offered (udp.ts); false: answered 0x07, like gateways without UDP. */
  udp = true;

  constructor(
    private readonly policy: AdmissionPolicy,
    private readonly faultFor: (port: number) => Fault | undefined,
    private readonly timeouts: PortTimeouts,
  ) {
    // noDelay: the sandbox stands in for real upstreams; Nagle on its sockets held small writes (an HTTP/2
    // upload's frames) for an ACK and made every test and benchmark through it measure the sandbox.
    this.server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => this.onConnection(socket));
  }

  /** Listens on `preferred` when it is free (a port the state file remembers), else on a port the system picks. */
  async listen(host: string, preferred = 0): Promise<number> {
    const attempt = (port: number): Promise<void> =>
      new Promise<void>((resolve, reject) => {
        const onError = (err: Error): void => {
          reject(new UpstreamError('UPSTREAM_LISTEN_FAILED', `cannot listen on ${host}:${port}: ${err.message}`));
        };
        this.server.once('error', onError);
        this.server.listen(port, host, () => {
          this.server.off('error', onError);
          // Embedded, the sandbox shares the daemon's process: a failed accept (EMFILE…) must not end it.
          this.server.on('error', noop);
          resolve();
        });
      });
    if (preferred > 0) {
      try {
        await attempt(preferred);
      } catch {
        await attempt(0);
      }
    } else {
      await attempt(0);
    }
    if (this.closed) {
      // close() ran while the listen was under way; it could not stop a server that was not yet listening.
      this.server.close();
      throw new UpstreamError('UPSTREAM_CLOSED', 'the upstreams were closed while opening a port');
    }
    this.port = (this.server.address() as AddressInfo).port;
    return this.port;
  }

  /** Stops listening and destroys every live connection (clients and their targets). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const stopped = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    await stopped;
  }

  private track(socket: Socket): void {
    if (this.closed) {
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    // Errors are answered by destroying; this keeps an unhandled 'error' from taking the process down.
    socket.on('error', noop);
  }

  private onConnection(socket: Socket): void {
    this.track(socket);
    const fault = this.faultFor(this.port);
    if (fault?.mode === 'refuse') {
      socket.resetAndDestroy();
      return;
    }
    if (fault?.mode === 'stall') {
      socket.pause();
      return;
    }
    const resetAfter = fault?.mode === 'reset' ? (fault.afterBytes ?? 0) : undefined;
    const timer = setTimeout(() => socket.destroy(), this.timeouts.handshakeMs);
    socket.once('data', (first: Buffer) => {
      clearTimeout(timer);
      socket.pause();
      // A fault set after the accept (a connection opened ahead of its first request) applies from here.
      const lateReset = this.lateFault(socket, resetAfter);
      if (lateReset === false) return;
      socket.unshift(first);
      if (first[0] === 0x05) void this.serveSocks(socket, lateReset);
      else void this.serveHttp(socket, lateReset);
    });
    socket.once('close', () => clearTimeout(timer));
  }

  /**
   * The port's fault as it stands now, for a connection accepted before it was set: false when the
   * connection is to be left stalled or was reset here, else the byte count after which to reset (if any).
   */
  private lateFault(socket: Socket, resetAfter: number | undefined): number | undefined | false {
    const late = this.faultFor(this.port);
    if (late?.mode === 'stall') return false;
    if (late?.mode === 'refuse') {
      socket.resetAndDestroy();
      return false;
    }
    return resetAfter ?? (late?.mode === 'reset' ? (late.afterBytes ?? 0) : undefined);
  }

  private async serveSocks(socket: Socket, resetAfter: number | undefined): Promise<void> {
    const clientIp = clientAddress(socket);
    let admitted: Admission | undefined;
    const handshake = acceptSocks5<Admission>(socket, {
      timeoutMs: this.timeouts.handshakeMs,
      auth: this.policy.auth,
      udp: this.udp,
      authenticate: (username, password) => {
        admitted = this.policy.admit({ username, password, clientIp });
        return admitted.ok ? { ok: true, context: admitted } : { ok: false };
      },
    });
    socket.resume();
    let request: ConnectRequest<Admission>;
    try {
      request = await handshake;
    } catch {
      return; // answered and destroyed by the handshake
    }
    // The handshake stops listening for data but leaves the socket flowing; hold the bytes until we relay.
    socket.pause();
    // A fault set since the connection was accepted (one opened ahead, greeted and authenticated) applies to
    // its request: a stalled upstream stalls every request, a refusing one resets them.
    const late = this.lateFault(socket, resetAfter);
    if (late === false) return;
    resetAfter = late;
    if (this.policy.auth === 'none') admitted = this.policy.admit({ username: '', password: '', clientIp });
    if (!admitted?.ok) {
      writeReply(socket, REPLY.notAllowed);
      return;
    }
    if (request.command === 0x03) {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      serveUdpAssociate(socket, admitted.exit, admitted.meter, clientIp);
      return;
    }
    let target: Socket;
    try {
      target = await dial({ host: request.host, port: request.port, exit: admitted.exit, timeoutMs: this.timeouts.connectMs });
    } catch (err) {
      writeReply(socket, socksFailure(err));
      return;
    }
    if (!this.adopt(socket, target)) return;
    writeReply(socket, REPLY.succeeded, { host: target.localAddress ?? admitted.exit, port: target.localPort ?? 0 });
    relay(socket, target, { meter: admitted.meter, resetAfter, initial: request.head });
  }

  private async serveHttp(socket: Socket, resetAfter: number | undefined): Promise<void> {
    let head: RequestHead;
    try {
      head = await readRequestHead(socket, this.timeouts.handshakeMs);
    } catch (err) {
      const code = err instanceof HttpHeadError ? err.code : 'MALFORMED';
      if (code === 'TIMEOUT') answer(socket, 408, 'Request Timeout', 'request head timed out');
      else if (code === 'TOO_LARGE') answer(socket, 431, 'Request Header Fields Too Large', 'request head too large');
      else if (code === 'MALFORMED') answer(socket, 400, 'Bad Request', 'malformed request');
      else socket.destroy();
      return;
    }
    const destination = parseDestination(head);
    if (!destination) {
      answer(socket, 400, 'Bad Request', 'a proxy takes CONNECT host:port or an absolute http:// URI');
      return;
    }
    const credentials = basicCredentials(head);
    if (this.policy.auth === 'password' && !credentials) {
      answer(socket, 407, 'Proxy Authentication Required', 'proxy credentials required', REALM);
      return;
    }
    const admitted = this.policy.admit({
      username: credentials?.username ?? '',
      password: credentials?.password ?? '',
      clientIp: clientAddress(socket),
    });
    if (!admitted.ok) {
      if (admitted.refusal === 'credentials') {
        answer(socket, 407, 'Proxy Authentication Required', 'proxy credentials refused', REALM);
      } else answer(socket, 403, 'Forbidden', admitted.reason);
      return;
    }
    let target: Socket;
    try {
      target = await dial({ host: destination.host, port: destination.port, exit: admitted.exit, timeoutMs: this.timeouts.connectMs });
    } catch (err) {
      const timedOut = (err as NodeJS.ErrnoException).code === 'ETIMEDOUT';
      if (timedOut) answer(socket, 504, 'Gateway Timeout', 'target did not answer');
      else answer(socket, 502, 'Bad Gateway', `target refused: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
      return;
    }
    if (!this.adopt(socket, target)) return;
    if (head.method === 'CONNECT') {
      socket.write(ESTABLISHED);
      relay(socket, target, { meter: admitted.meter, resetAfter, initial: head.rest });
      return;
    }
    const forwarded = Buffer.from(originHead(head, destination.path, destination.hostHeader), 'latin1');
    const initial = head.rest ? Buffer.concat([forwarded, head.rest]) : forwarded;
    // One request per connection: its answer tells the client to close, so no second request (with this node's
    // Proxy-Authorization) is relayed raw to the target.
    const heads = new ClosingHeads();
    relay(socket, target, { meter: admitted.meter, resetAfter, initial, fromTarget: (chunk) => heads.feed(chunk) });
  }

  /** Tracks the target with the client; false (and both destroyed) when the client left meanwhile. */
  private adopt(client: Socket, target: Socket): boolean {
    if (client.destroyed || this.closed) {
      target.destroy();
      client.destroy();
      return false;
    }
    this.track(target);
    return true;
  }
}

function socksFailure(err: unknown): ReplyCode {
  switch ((err as NodeJS.ErrnoException).code) {
    case 'ECONNREFUSED':
      return REPLY.connectionRefused;
    case 'ENETUNREACH':
      return REPLY.networkUnreachable;
    case 'EHOSTUNREACH':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'ETIMEDOUT':
      return REPLY.hostUnreachable;
    default:
      return REPLY.generalFailure;
  }
}

function answer(socket: Socket, status: number, text: string, body: string, extra = ''): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const payload = Buffer.from(body + '\n', 'utf8');
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\n${extra}Content-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${payload.length}\r\nConnection: close\r\n\r\n${payload.toString('utf8')}`,
  );
  setTimeout(() => socket.destroy(), 1000).unref();
}

interface Destination {
  host: string;
  port: number;
  /** origin-form path for a forwarded plain request */
  path: string;
  hostHeader: string;
}

function parseDestination(head: RequestHead): Destination | null {
  if (head.method === 'CONNECT') {
    const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+)):([0-9]{1,5})$/.exec(head.target);
    if (!match) return null;
    const port = Number(match[3]);
    if (port < 1 || port > 65535) return null;
    return { host: match[1] ?? match[2]!, port, path: '', hostHeader: head.target };
  }
  if (!head.target.startsWith('http://')) return null;
  let url: URL;
  try {
    url = new URL(head.target);
  } catch {
    return null;
  }
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (!host) return null;
  return { host, port: url.port ? Number(url.port) : 80, path: `${url.pathname}${url.search}`, hostHeader: url.host };
}

/** The request as the target should see it: origin-form, no proxy headers, one request per connection. */
function originHead(head: RequestHead, path: string, hostHeader: string): string {
  let text = `${head.method} ${path} ${head.version}\r\n`;
  let hasHost = false;
  for (const [name, value] of head.headers) {
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower)) continue;
    if (lower === 'host') hasHost = true;
    text += `${name}: ${value}\r\n`;
  }
  if (!hasHost) text += `Host: ${hostHeader}\r\n`;
  return `${text}Connection: close\r\n\r\n`;
}
