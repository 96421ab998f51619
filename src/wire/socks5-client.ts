// The client side of a SOCKS5 CONNECT (RFC 1928, RFC 1929 user/password) on an already connected socket,
// for dialing SOCKS5 upstreams. Like the server side (socks5.ts) it is a small state machine over 'data'
// events: one listener set per dial, the reply parsed to its exact length so bytes the target sent behind
// it are handed back as `head` without waiting a turn, and no timer of its own (the caller holds the one
// deadline and cancels through the returned detach function).
//
// socks5Connect sends each message after the previous answer. socks5ConnectPipelined sends greeting, auth
// and CONNECT in one write (two round trips fewer), for upstreams that read what they were sent: microsocks
// (1.0.3, checked) reads one message per recv() and drops the rest, so it answers the greeting and then
// nothing. That silence is the sign: the auth answer comes with the method answer from a server that read
// both (its check is local), so a wait of a few round trips after the method answer ends in NOT_PIPELINED
// and the caller dials again step by step (dial-socks5.ts remembers the upstream). Only with credentials:
// without them the next answer is the CONNECT's, which waits on the target and has no bound to wait by.
import type { Socket } from 'node:net';
import { isIPv4, isIPv6 } from 'node:net';
import { AUTH_VERSION, SOCKS_VERSION } from './socks5.ts';
import { RotorError } from '../errors/rotor-error.ts';
import { ipv6Bytes } from './socks5-udp.ts';

export type Socks5ClientFailure =
  | 'BAD_REQUEST'
  | 'NO_ACCEPTABLE_METHOD'
  | 'AUTH_FAILED'
  | 'REJECTED'
  | 'BAD_REPLY'
  | 'CLOSED'
  /** A pipelined handshake went unanswered after the method answer (or was refused): dial again step by step. */
  | 'NOT_PIPELINED';

export class Socks5ClientError extends RotorError {
  declare readonly code: Socks5ClientFailure;
  constructor(
    code: Socks5ClientFailure,
    message: string,
    /** REP of a refused CONNECT (code REJECTED) */
    readonly reply?: number,
    /** errno code when the socket failed (code CLOSED) */
    readonly errno?: string,
  ) {
    super(code, message, { httpStatus: 502 });
  }
}

/** Read-only: the encoded message is kept per object (authMessageOf). */
export interface Socks5Credentials {
  readonly username: string;
  readonly password: string;
}

const METHOD_NONE = 0x00;
const METHOD_PASSWORD = 0x02;
const NO_ACCEPTABLE = 0xff;
const GREETING_NONE = Buffer.from([SOCKS_VERSION, 1, METHOD_NONE]);
const GREETING_BOTH = Buffer.from([SOCKS_VERSION, 2, METHOD_NONE, METHOD_PASSWORD]);
/** A pipelined greeting offers only user/password: a server choosing "none" would read the auth as the request. */
const GREETING_PASSWORD = Buffer.from([SOCKS_VERSION, 1, METHOD_PASSWORD]);

const enum Stage {
  Method,
  Auth,
  Reply,
  Done,
}

/**
 * Encoded RFC 1929 requests by credentials object (null: a field too long): a caller that keeps one object
 * per upstream pays the encoding once. The buffer is written as is and never changed.
 */
const authMessages = new WeakMap<Socks5Credentials, Buffer | null>();

function authMessageOf(c: Socks5Credentials): Buffer | undefined {
  let m = authMessages.get(c);
  if (m === undefined) {
    m = authMessage(c) ?? null;
    authMessages.set(c, m);
  }
  return m ?? undefined;
}

/** RFC 1929 request; undefined when a field is over 255 bytes. */
function authMessage(c: Socks5Credentials): Buffer | undefined {
  const u = Buffer.byteLength(c.username);
  const p = Buffer.byteLength(c.password);
  if (u > 255 || p > 255) return undefined;
  const b = Buffer.allocUnsafe(3 + u + p);
  b[0] = AUTH_VERSION;
  b[1] = u;
  b.write(c.username, 2, 'utf8');
  b[2 + u] = p;
  b.write(c.password, 3 + u, 'utf8');
  return b;
}

/** RFC 1928 CONNECT request for host:port; undefined when the host cannot be encoded. */
export function connectRequest(host: string, port: number): Buffer | undefined {
  if (!Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  let b: Buffer;
  if (isIPv4(host)) {
    b = Buffer.allocUnsafe(10);
    b[3] = 0x01;
    const parts = host.split('.');
    for (let i = 0; i < 4; i++) b[4 + i] = Number(parts[i]);
  } else if (isIPv6(host)) {
    b = Buffer.allocUnsafe(22);
    b[3] = 0x04;
    ipv6Bytes(host).copy(b, 4);
  } else {
    const n = Buffer.byteLength(host);
    if (n === 0 || n > 255) return undefined;
    b = Buffer.allocUnsafe(7 + n);
    b[3] = 0x03;
    b[4] = n;
    b.write(host, 5, 'latin1');
  }
  b[0] = SOCKS_VERSION;
  b[1] = 0x01;
  b[2] = 0x00;
  b.writeUInt16BE(port, b.length - 2);
  return b;
}

/**
 * Runs greeting, optional RFC 1929 auth and CONNECT on `socket`. `done` is called once: with the bytes that
 * arrived behind the reply (socket paused, listeners gone) or with a typed error (listeners gone; the caller
 * destroys the socket). Returns a function that detaches without calling `done` (the caller's deadline or abort).
 */
export function socks5Connect(
  socket: Socket,
  target: { host: string; port: number },
  credentials: Socks5Credentials | undefined,
  done: (err: Socks5ClientError | null, head: Buffer | null, bound?: string) => void,
): () => void {
  const request = connectRequest(target.host, target.port);
  const auth = credentials ? authMessageOf(credentials) : undefined;
  if (!request || (credentials && !auth)) {
    done(
      new Socks5ClientError('BAD_REQUEST', request ? 'upstream credentials too long for SOCKS5' : 'target cannot be encoded for SOCKS5'),
      null,
    );
    return noop;
  }
  const h = new ClientHandshake(socket as HandshakeSocket, request, auth, done);
  listen(socket);
  socket.write(auth ? GREETING_BOTH : GREETING_NONE);
  return h.detach;
}

/**
 * socks5Connect with greeting, RFC 1929 auth and CONNECT in one write (credentials required). Fails with
 * NOT_PIPELINED when the upstream answered the greeting and then not the auth within `waitMs` (at least twice
 * the greeting's round trip), closed after the greeting, or refused the user/password-only greeting: the
 * caller dials again with socks5Connect on a new connection. `done` as socks5Connect's.
 */
export function socks5ConnectPipelined(
  socket: Socket,
  target: { host: string; port: number },
  credentials: Socks5Credentials,
  waitMs: number,
  done: (err: Socks5ClientError | null, head: Buffer | null, bound?: string) => void,
): () => void {
  const request = connectRequest(target.host, target.port);
  const auth = authMessageOf(credentials);
  if (!request || !auth) {
    done(
      new Socks5ClientError('BAD_REQUEST', request ? 'upstream credentials too long for SOCKS5' : 'target cannot be encoded for SOCKS5'),
      null,
    );
    return noop;
  }
  const h = new ClientHandshake(socket as HandshakeSocket, request, auth, done, Stage.Method, false, waitMs);
  listen(socket);
  socket.write(Buffer.concat([GREETING_PASSWORD, auth, request], GREETING_PASSWORD.length + auth.length + request.length));
  return h.detach;
}

/**
 * socks5Greet with greeting and auth in one write, for an upstream known to read pipelined bytes; fails with
 * NOT_PIPELINED as socks5ConnectPipelined does.
 */
export function socks5GreetPipelined(
  socket: Socket,
  credentials: Socks5Credentials,
  waitMs: number,
  done: (err: Socks5ClientError | null) => void,
): () => void {
  const auth = authMessageOf(credentials);
  if (!auth) {
    done(new Socks5ClientError('BAD_REQUEST', 'upstream credentials too long for SOCKS5'));
    return noop;
  }
  const h = new ClientHandshake(socket as HandshakeSocket, EMPTY, auth, (err) => done(err), Stage.Method, true, waitMs);
  listen(socket);
  socket.write(Buffer.concat([GREETING_PASSWORD, auth], GREETING_PASSWORD.length + auth.length));
  return h.detach;
}

/** UDP ASSOCIATE with "any address" (0.0.0.0:0): the client's own UDP address is not known to the upstream. */
const ASSOCIATE_REQUEST = Buffer.from([SOCKS_VERSION, 0x03, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);

/**
 * Greeting, optional RFC 1929 auth and UDP ASSOCIATE (RFC 1928 §7) on `socket`; `done` gets the relay's
 * address from the reply (BND.ADDR, BND.PORT) or a typed error. The association lives as long as `socket`.
 */
export function socks5UdpAssociate(
  socket: Socket,
  credentials: Socks5Credentials | undefined,
  done: (err: Socks5ClientError | null, relay: { host: string; port: number } | null) => void,
): () => void {
  const auth = credentials ? authMessageOf(credentials) : undefined;
  if (credentials && !auth) {
    done(new Socks5ClientError('BAD_REQUEST', 'upstream credentials too long for SOCKS5'), null);
    return noop;
  }
  let h: ClientHandshake | undefined = undefined;
  h = new ClientHandshake(socket as HandshakeSocket, ASSOCIATE_REQUEST, auth, (err) => {
    const reply = h?.reply;
    if (err || !reply) return done(err ?? new Socks5ClientError('BAD_REPLY', 'no reply'), null);
    const atyp = reply[3];
    if (atyp === 0x01) return done(null, { host: `${reply[4]}.${reply[5]}.${reply[6]}.${reply[7]}`, port: reply.readUInt16BE(8) });
    if (atyp === 0x04) {
      const parts: string[] = [];
      for (let i = 0; i < 8; i++) parts.push(reply.readUInt16BE(4 + i * 2).toString(16));
      return done(null, { host: parts.join(':'), port: reply.readUInt16BE(20) });
    }
    return done(null, { host: reply.toString('latin1', 5, 5 + reply[4]!), port: reply.readUInt16BE(reply.length - 2) });
  });
  listen(socket);
  socket.write(auth ? GREETING_BOTH : GREETING_NONE);
  return h.detach;
}

/** The handshake's listeners; on(), not once(): fail() detaches them all when the first fires (once() would wrap each in a new function). */
function listen(socket: Socket): void {
  socket.on('data', onData);
  socket.on('end', onClose);
  socket.on('close', onClose);
  socket.on('error', onError);
}

/**
 * The first half of socks5Connect, for a connection kept ready before it is needed: greeting and optional
 * RFC 1929 auth. `done(null)` once the upstream would take a request (listeners gone, socket flowing, nothing
 * buffered); then socks5Request sends it.
 */
export function socks5Greet(
  socket: Socket,
  credentials: Socks5Credentials | undefined,
  done: (err: Socks5ClientError | null) => void,
): () => void {
  const auth = credentials ? authMessageOf(credentials) : undefined;
  if (credentials && !auth) {
    done(new Socks5ClientError('BAD_REQUEST', 'upstream credentials too long for SOCKS5'));
    return noop;
  }
  const h = new ClientHandshake(socket as HandshakeSocket, EMPTY, auth, (err) => done(err), Stage.Method, true);
  listen(socket);
  socket.write(auth ? GREETING_BOTH : GREETING_NONE);
  return h.detach;
}

/** The second half: CONNECT on a socket socks5Greet readied; `done` as socks5Connect's. */
export function socks5Request(
  socket: Socket,
  target: { host: string; port: number },
  done: (err: Socks5ClientError | null, head: Buffer | null, bound?: string) => void,
): () => void {
  const request = connectRequest(target.host, target.port);
  if (!request) {
    done(new Socks5ClientError('BAD_REQUEST', 'target cannot be encoded for SOCKS5'), null);
    return noop;
  }
  const h = new ClientHandshake(socket as HandshakeSocket, request, undefined, done, Stage.Reply, false);
  listen(socket);
  socket.write(request);
  return h.detach;
}

const EMPTY = Buffer.alloc(0);

/** The handshake a socket belongs to, for the shared listeners below (one set for all dials, no closures). */
const HANDSHAKE = Symbol('rotor.socks5Client');
type HandshakeSocket = Socket & { [HANDSHAKE]?: ClientHandshake | undefined };

/** One dial's handshake state: the stage, bytes of a partial answer, and what to send and call. */
class ClientHandshake {
  private buffer: Buffer | null = null;
  /** The whole successful reply (UDP ASSOCIATE reads its bound address from it). */
  reply: Buffer | null = null;
  /** Detaches without calling `done` (handed to the caller: bound once, the only closure of a dial). */
  readonly detach = (): void => this.stop();

  constructor(
    private readonly socket: HandshakeSocket,
    private readonly request: Buffer,
    private readonly auth: Buffer | undefined,
    private readonly done: (err: Socks5ClientError | null, head: Buffer | null, bound?: string) => void,
    private stage: Stage = Stage.Method,
    /** socks5Greet: done once the upstream would take a request */
    private readonly greetOnly = false,
    /** Pipelined (everything already written): how long the auth answer may lag the method answer; 0: step by step. */
    private readonly pipelineWaitMs = 0,
  ) {
    socket[HANDSHAKE] = this;
    if (pipelineWaitMs > 0) this.sentAt = performance.now();
  }

  private sentAt = 0;
  /** Pipelined: armed between the method answer and the auth answer. */
  private stall: NodeJS.Timeout | undefined;

  /** Pipelined, the method answered and the auth not within the wait: the upstream dropped what followed. */
  stalled(): void {
    this.stall = undefined;
    if (this.stage === Stage.Auth) this.fail(new Socks5ClientError('NOT_PIPELINED', 'upstream dropped the pipelined handshake'));
  }

  /** The upstream closed or failed: after a pipelined greeting's answer, a sign it did not take the rest. */
  closed(message: string, errno?: string): void {
    if (this.pipelineWaitMs > 0 && this.stage === Stage.Auth)
      this.fail(new Socks5ClientError('NOT_PIPELINED', 'upstream closed after answering the pipelined greeting'));
    else this.fail(new Socks5ClientError('CLOSED', message, undefined, errno));
  }

  /** The greeting (and auth) went through: a kept-ready connection is done here. */
  private ready(): void {
    this.stop();
    this.done(null, null);
  }

  stop(): void {
    this.stage = Stage.Done;
    if (this.stall !== undefined) {
      clearTimeout(this.stall);
      this.stall = undefined;
    }
    const socket = this.socket;
    socket[HANDSHAKE] = undefined;
    socket.off('data', onData);
    socket.off('end', onClose);
    socket.off('close', onClose);
    socket.off('error', onError);
  }

  fail(err: Socks5ClientError): void {
    this.stop();
    this.done(err, null);
  }

  data(chunk: Buffer): void {
    let b = this.buffer === null ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const consumed = this.step(b);
      if (consumed === 0) break;
      b = b.subarray(consumed);
    }
    this.buffer = this.stage === Stage.Done || b.length === 0 ? null : b;
    // Pipelined: the method answered and not yet the auth (a server that read both sends them together).
    if (this.stage === Stage.Auth && this.pipelineWaitMs > 0 && this.stall === undefined) {
      const wait = Math.max(this.pipelineWaitMs, 2 * (performance.now() - this.sentAt));
      this.stall = setTimeout(onStall, wait, this);
    }
  }

  /** Handles one answer at the current stage; returns the bytes it consumed, 0 when more are needed or done. */
  private step(b: Buffer): number {
    switch (this.stage) {
      case Stage.Method: {
        if (b.length < 2) return 0;
        if (b[0] !== SOCKS_VERSION) {
          this.fail(new Socks5ClientError('BAD_REPLY', 'upstream is not a SOCKS5 server'));
          return 0;
        }
        const method = b[1];
        if (this.pipelineWaitMs > 0) {
          // Only user/password was offered, and auth and request are sent: anything else means step by step.
          if (method !== METHOD_PASSWORD) {
            this.fail(new Socks5ClientError('NOT_PIPELINED', `upstream answered a user/password-only greeting with method ${method}`));
            return 0;
          }
          this.stage = Stage.Auth;
          return 2;
        }
        if (method === METHOD_PASSWORD && this.auth) {
          this.socket.write(this.auth);
          this.stage = Stage.Auth;
        } else if (method === METHOD_NONE) {
          if (this.greetOnly) {
            this.ready();
            return 0;
          }
          this.socket.write(this.request);
          this.stage = Stage.Reply;
        } else if (method === NO_ACCEPTABLE) {
          this.fail(new Socks5ClientError('NO_ACCEPTABLE_METHOD', 'upstream accepts none of the offered authentication methods'));
          return 0;
        } else {
          this.fail(new Socks5ClientError('BAD_REPLY', `upstream chose an authentication method that was not offered (${method})`));
          return 0;
        }
        return 2;
      }
      case Stage.Auth: {
        if (b.length < 2) return 0;
        // Only the status is checked: some servers answer the RFC 1929 version byte as 0x05.
        if (b[1] !== 0x00) {
          this.fail(new Socks5ClientError('AUTH_FAILED', 'upstream refused its credentials'));
          return 0;
        }
        if (this.stall !== undefined) {
          clearTimeout(this.stall);
          this.stall = undefined;
        }
        if (this.greetOnly) {
          this.ready();
          return 0;
        }
        if (this.pipelineWaitMs === 0) this.socket.write(this.request);
        this.stage = Stage.Reply;
        return 2;
      }
      case Stage.Reply: {
        if (b.length < 2) return 0;
        if (b[0] !== SOCKS_VERSION) {
          this.fail(new Socks5ClientError('BAD_REPLY', 'upstream answered CONNECT with a bad version'));
          return 0;
        }
        const rep = b[1]!;
        if (rep !== 0x00) {
          this.fail(new Socks5ClientError('REJECTED', `upstream rejected the connection (reply ${rep})`, rep));
          return 0;
        }
        if (b.length < 4) return 0;
        const atyp = b[3];
        if (atyp !== 0x01 && atyp !== 0x04 && atyp !== 0x03) {
          this.fail(new Socks5ClientError('BAD_REPLY', `upstream answered with address type ${atyp}`));
          return 0;
        }
        if (b.length < 5) return 0;
        const end = atyp === 0x01 ? 10 : atyp === 0x04 ? 22 : 7 + b[4]!;
        if (b.length < end) return 0;
        this.reply = b.subarray(0, end);
        this.stop();
        this.socket.pause();
        this.done(null, b.length > end ? b.subarray(end) : null, boundAddress(this.reply));
        return 0;
      }
      default:
        return 0;
    }
  }
}

/**
 * A CONNECT reply's BND.ADDR: the address the server connected to the target from (RFC 1928 §6), i.e. the
 * exit. undefined for a name or an unspecified address (0.0.0.0, ::), which name no exit.
 */
export function boundAddress(reply: Buffer): string | undefined {
  const atyp = reply[3];
  if (atyp === 0x01 && reply.length >= 10) {
    const a = `${reply[4]}.${reply[5]}.${reply[6]}.${reply[7]}`;
    return a === '0.0.0.0' ? undefined : a;
  }
  if (atyp === 0x04 && reply.length >= 22) {
    if (reply.subarray(4, 20).every((x) => x === 0)) return undefined;
    const parts: string[] = [];
    for (let i = 0; i < 8; i++) parts.push(reply.readUInt16BE(4 + i * 2).toString(16));
    // The WHATWG URL parser writes an IPv6 address in its canonical (RFC 5952) form.
    return new URL(`http://[${parts.join(':')}]/`).hostname.slice(1, -1);
  }
  return undefined;
}

function onData(this: HandshakeSocket, chunk: Buffer): void {
  this[HANDSHAKE]?.data(chunk);
}
function onClose(this: HandshakeSocket): void {
  this[HANDSHAKE]?.closed('upstream closed during the SOCKS5 handshake');
}
function onError(this: HandshakeSocket, err: NodeJS.ErrnoException): void {
  this[HANDSHAKE]?.closed(`upstream failed during the SOCKS5 handshake: ${err.code ?? 'error'}`, err.code);
}
function onStall(h: ClientHandshake): void {
  h.stalled();
}

function noop(): void {}
