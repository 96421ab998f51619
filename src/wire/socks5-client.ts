// The client side of SOCKS5 (RFC 1928, RFC 1929 user/password) for dialing SOCKS5 upstreams, sans I/O: a
// Socks5Client is fed the bytes the upstream sent and returns what happened (more needed, done, failed), with
// the bytes to send next in `out`. It holds no socket, no listener and no timer: the module that owns the
// socket reads it, writes what it says, keeps the deadlines, and acts on the result itself (nothing here calls
// back into the dialer). The reply is parsed to its exact length, so bytes the target sent behind it are
// handed back as `head`.
//
// Step by step, each message goes after the previous answer. Pipelined, greeting, auth and CONNECT go in one
// write (two round trips fewer), for upstreams that read what they were sent: microsocks (1.0.3, checked)
// reads one message per recv() and drops the rest, so it answers the greeting and then nothing. That silence
// is the sign: the auth answer comes with the method answer from a server that read both (its check is local),
// so the owner waits stallWait() after the method answer and then calls stalled(), which fails NOT_PIPELINED;
// the dialer dials again step by step (and remembers the upstream). Only with credentials: without them the
// next answer is the CONNECT's, which waits on the target and has no bound to wait by.
import { isIPv6 } from 'node:net';
import { AUTH_VERSION, SOCKS_VERSION } from './socks5.ts';
import { RotorError } from '../errors/rotor-error.ts';
import { ipv4Value, ipv6Bytes } from './ip-bytes.ts';

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

const STAGE_METHOD = 0;
const STAGE_AUTH = 1;
const STAGE_REPLY = 2;
const STAGE_DONE = 3;

/** What feed() found: more bytes needed, the handshake done, or failed (`error`). */
export type Step = 0 | 1 | 2;
export const MORE: Step = 0;
export const DONE: Step = 1;
export const FAILED: Step = 2;

/** What a Socks5Client is for. */
const CONNECT = 0;
/** greeting and auth only, for a connection kept ready before it is needed (done once a request would be taken) */
const GREET = 1;
/** CONNECT on a connection greeted before */
const REQUEST = 2;
const ASSOCIATE = 3;

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
  const v4 = ipv4Value(host);
  if (v4 >= 0) {
    b = Buffer.allocUnsafe(10);
    b[3] = 0x01;
    b.writeUInt32BE(v4, 4);
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

/** UDP ASSOCIATE with "any address" (0.0.0.0:0): the client's own UDP address is not known to the upstream. */
const ASSOCIATE_REQUEST = Buffer.from([SOCKS_VERSION, 0x03, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
const EMPTY = Buffer.alloc(0);

/**
 * One handshake's state: the stage, the bytes of a partial answer, what to send. Made by socks5Connect,
 * socks5Greet, socks5Request or socks5Associate; start() gives the first bytes to write, feed() each chunk the
 * upstream sends. A client made for a request that cannot be encoded is failed from the start (`error` set,
 * start() returns null).
 */
export class Socks5Client {
  /** Bytes to write after the last feed() (null: nothing); the owner writes them. */
  out: Buffer | null = null;
  /** Done: target bytes that arrived behind the reply (the owner pauses the socket and hands them on). */
  head: Buffer | null = null;
  /** Done, CONNECT: the reply's bound address (the exit), when it names one. */
  bound: string | undefined = undefined;
  /** Done, UDP ASSOCIATE: the reply's relay address. */
  relay: { host: string; port: number } | undefined = undefined;
  /** Failed: why. */
  error: Socks5ClientError | null = null;
  /** Whether greeting, auth and request go in one write (until stepwise()). */
  pipelined: boolean;
  /** Whether this is a UDP ASSOCIATE. */
  readonly associating: boolean;
  private stage = STAGE_METHOD;
  private buffer: Buffer | null = null;
  private sentAt = 0;
  private stallArmed = false;

  constructor(
    private readonly mode: number,
    private readonly request: Buffer | undefined,
    private readonly auth: Buffer | undefined,
    /** Pipelined (everything written at once): how long the auth answer may lag the method answer at least; 0: step by step. */
    private pipelineWaitMs: number,
    failure?: Socks5ClientError,
  ) {
    this.pipelined = pipelineWaitMs > 0;
    this.associating = mode === ASSOCIATE;
    if (failure !== undefined) {
      this.error = failure;
      this.stage = STAGE_DONE;
    } else if (mode === REQUEST) this.stage = STAGE_REPLY;
  }

  /** The first bytes to write (null: failed already). */
  start(): Buffer | null {
    if (this.error !== null) return null;
    const auth = this.auth;
    if (this.mode === REQUEST) return this.request!;
    if (this.pipelineWaitMs > 0) {
      this.sentAt = performance.now();
      const request = this.mode === GREET ? EMPTY : this.request!;
      return Buffer.concat([GREETING_PASSWORD, auth!, request], GREETING_PASSWORD.length + auth!.length + request.length);
    }
    return auth ? GREETING_BOTH : GREETING_NONE;
  }

  /**
   * A pipelined handshake the upstream did not take: the same handshake step by step, for a new connection
   * (the owner writes start() on it).
   */
  stepwise(): void {
    this.pipelineWaitMs = 0;
    this.pipelined = false;
    this.stage = STAGE_METHOD;
    this.buffer = null;
    this.error = null;
    this.out = null;
    this.stallArmed = false;
  }

  /**
   * Pipelined, after a feed(): how long to wait for the auth answer before calling stalled() (at least twice
   * the greeting's round trip); 0 when no wait is to be started now (not waiting, or started already).
   */
  stallWait(): number {
    if (this.stage !== STAGE_AUTH || this.pipelineWaitMs === 0 || this.stallArmed) return 0;
    this.stallArmed = true;
    return Math.max(this.pipelineWaitMs, 2 * (performance.now() - this.sentAt));
  }

  /** The wait stallWait() gave is over: FAILED (NOT_PIPELINED) when the auth answer has not come, else MORE/DONE as it stands. */
  stalled(): Step {
    if (this.stage === STAGE_AUTH && this.pipelineWaitMs > 0)
      return this.fail(new Socks5ClientError('NOT_PIPELINED', 'upstream dropped the pipelined handshake'));
    return this.stage === STAGE_DONE ? (this.error ? FAILED : DONE) : MORE;
  }

  /**
   * The upstream closed (or the socket failed: `err`) during the handshake: after a pipelined greeting's
   * answer, a sign it did not take the rest.
   */
  closed(err?: { code?: string | undefined }): Step {
    if (this.stage === STAGE_DONE) return this.error ? FAILED : DONE;
    if (this.pipelineWaitMs > 0 && this.stage === STAGE_AUTH)
      return this.fail(new Socks5ClientError('NOT_PIPELINED', 'upstream closed after answering the pipelined greeting'));
    if (err === undefined) return this.fail(new Socks5ClientError('CLOSED', 'upstream closed during the SOCKS5 handshake'));
    const message = `upstream failed during the SOCKS5 handshake: ${err.code ?? 'error'}`;
    return this.fail(new Socks5ClientError('CLOSED', message, undefined, err.code));
  }

  /** The upstream's next bytes. */
  feed(chunk: Buffer): Step {
    this.out = null;
    if (this.stage === STAGE_DONE) return this.error ? FAILED : DONE;
    let b = this.buffer === null ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const consumed = this.step(b);
      if (consumed === 0) break;
      b = b.subarray(consumed);
    }
    if (this.stage === STAGE_DONE) {
      this.buffer = null;
      return this.error ? FAILED : DONE;
    }
    this.buffer = b.length === 0 ? null : b;
    return MORE;
  }

  private fail(err: Socks5ClientError): Step {
    this.stage = STAGE_DONE;
    this.error = err;
    this.out = null;
    return FAILED;
  }

  private send(b: Buffer): void {
    this.out = this.out === null ? b : Buffer.concat([this.out, b]);
  }

  /** Handles one answer at the current stage; returns the bytes it consumed, 0 when more are needed or done. */
  private step(b: Buffer): number {
    switch (this.stage) {
      case STAGE_METHOD: {
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
          this.stage = STAGE_AUTH;
          return 2;
        }
        if (method === METHOD_PASSWORD && this.auth) {
          this.send(this.auth);
          this.stage = STAGE_AUTH;
        } else if (method === METHOD_NONE) {
          if (this.mode === GREET) {
            this.stage = STAGE_DONE;
            return 0;
          }
          this.send(this.request!);
          this.stage = STAGE_REPLY;
        } else if (method === NO_ACCEPTABLE) {
          this.fail(new Socks5ClientError('NO_ACCEPTABLE_METHOD', 'upstream accepts none of the offered authentication methods'));
          return 0;
        } else {
          this.fail(new Socks5ClientError('BAD_REPLY', `upstream chose an authentication method that was not offered (${method})`));
          return 0;
        }
        return 2;
      }
      case STAGE_AUTH: {
        if (b.length < 2) return 0;
        // Only the status is checked: some servers answer the RFC 1929 version byte as 0x05.
        if (b[1] !== 0x00) {
          this.fail(new Socks5ClientError('AUTH_FAILED', 'upstream refused its credentials'));
          return 0;
        }
        if (this.mode === GREET) {
          this.stage = STAGE_DONE;
          return 0;
        }
        if (this.pipelineWaitMs === 0) this.send(this.request!);
        this.stage = STAGE_REPLY;
        return 2;
      }
      case STAGE_REPLY: {
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
        this.stage = STAGE_DONE;
        // Read in place (both read the reply's own length from its address type): no view per reply.
        if (this.mode === ASSOCIATE) this.relay = relayAddress(b);
        else {
          this.bound = boundAddress(b);
          if (b.length > end) this.head = b.subarray(end);
        }
        return 0;
      }
      default:
        return 0;
    }
  }
}

const TOO_LONG = 'upstream credentials too long for SOCKS5';
const UNENCODABLE = 'target cannot be encoded for SOCKS5';

/**
 * Greeting, optional RFC 1929 auth and CONNECT to `target`. `pipelineWaitMs` > 0 (credentials required): all
 * in one write, failing NOT_PIPELINED when the upstream answered the greeting and then not the auth within the
 * wait (stallWait), closed after the greeting, or refused the user/password-only greeting.
 */
export function socks5Connect(
  target: { host: string; port: number },
  credentials: Socks5Credentials | undefined,
  pipelineWaitMs = 0,
): Socks5Client {
  const request = connectRequest(target.host, target.port);
  const auth = credentials ? authMessageOf(credentials) : undefined;
  if (!request || (credentials && !auth))
    return new Socks5Client(CONNECT, undefined, undefined, 0, new Socks5ClientError('BAD_REQUEST', request ? TOO_LONG : UNENCODABLE));
  return new Socks5Client(CONNECT, request, auth, auth ? pipelineWaitMs : 0);
}

/**
 * The first half of socks5Connect, for a connection kept ready before it is needed: greeting and optional
 * RFC 1929 auth (pipelined as socks5Connect's when `pipelineWaitMs` > 0). Done once the upstream would take a
 * request; then socks5Request's client sends it.
 */
export function socks5Greet(credentials: Socks5Credentials | undefined, pipelineWaitMs = 0): Socks5Client {
  const auth = credentials ? authMessageOf(credentials) : undefined;
  if (credentials && !auth) return new Socks5Client(GREET, undefined, undefined, 0, new Socks5ClientError('BAD_REQUEST', TOO_LONG));
  return new Socks5Client(GREET, EMPTY, auth, auth ? pipelineWaitMs : 0);
}

/** The second half: CONNECT on a connection a socks5Greet client readied. */
export function socks5Request(target: { host: string; port: number }): Socks5Client {
  const request = connectRequest(target.host, target.port);
  if (!request) return new Socks5Client(REQUEST, undefined, undefined, 0, new Socks5ClientError('BAD_REQUEST', UNENCODABLE));
  return new Socks5Client(REQUEST, request, undefined, 0);
}

/**
 * Greeting, optional RFC 1929 auth and UDP ASSOCIATE (RFC 1928 §7): done with the relay's address from the
 * reply (BND.ADDR, BND.PORT) in `relay`. The association lives as long as the connection.
 */
export function socks5Associate(credentials: Socks5Credentials | undefined): Socks5Client {
  const auth = credentials ? authMessageOf(credentials) : undefined;
  if (credentials && !auth) return new Socks5Client(ASSOCIATE, undefined, undefined, 0, new Socks5ClientError('BAD_REQUEST', TOO_LONG));
  return new Socks5Client(ASSOCIATE, ASSOCIATE_REQUEST, auth, 0);
}

function relayAddress(reply: Buffer): { host: string; port: number } {
  const atyp = reply[3];
  if (atyp === 0x01) return { host: `${reply[4]}.${reply[5]}.${reply[6]}.${reply[7]}`, port: reply.readUInt16BE(8) };
  if (atyp === 0x04) {
    const parts: string[] = [];
    for (let i = 0; i < 8; i++) parts.push(reply.readUInt16BE(4 + i * 2).toString(16));
    return { host: parts.join(':'), port: reply.readUInt16BE(20) };
  }
  const end = 5 + reply[4]!;
  return { host: reply.toString('latin1', 5, end), port: reply.readUInt16BE(end) };
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
