// The server side of a SOCKS5 handshake (RFC 1928 CONNECT, RFC 1929 user/password), shared by Rotor's own
// listener and the sandbox's upstream proxies. Its steps are data (Socks5ServerSteps: fed bytes, it answers more,
// login, request or failed, with the bytes to write): Rotor's listener drives them from its own socket listeners;
// startSocks5/acceptSocks5 drive them from this module's, with a promise per step. Every malformed or stalled
// input ends in a typed failure and a closed socket instead of a hung promise.
import type { Socket } from 'node:net';
import { isIPv6 } from 'node:net';
import { ipv4Value, ipv6Bytes } from './ip-bytes.ts';
import { slotIf, slotOf } from './socket-slot.ts';
import { RotorError } from '../errors/rotor-error.ts';

export const SOCKS_VERSION = 0x05;
export const AUTH_VERSION = 0x01;

export const REPLY = {
  succeeded: 0x00,
  generalFailure: 0x01,
  notAllowed: 0x02,
  networkUnreachable: 0x03,
  hostUnreachable: 0x04,
  connectionRefused: 0x05,
  ttlExpired: 0x06,
  commandNotSupported: 0x07,
  addressTypeNotSupported: 0x08,
} as const;
export type ReplyCode = (typeof REPLY)[keyof typeof REPLY];

export type HandshakeFailure =
  | 'TIMEOUT'
  | 'CLOSED'
  | 'BAD_VERSION'
  /** The client sent more than MAX_HANDSHAKE_BYTES before its request was complete (a flood, not a version). */
  | 'TOO_LARGE'
  | 'NO_ACCEPTABLE_METHOD'
  | 'BAD_AUTH_VERSION'
  | 'AUTH_FAILED'
  | 'BAD_COMMAND'
  | 'BAD_ADDRESS';

export class Socks5HandshakeError extends RotorError {
  declare readonly code: HandshakeFailure;
  /** The owner the handshake was started with (startSocks5): a caller's one reaction for all handshakes finds its connection here. */
  owner: unknown = undefined;
  constructor(code: HandshakeFailure, message: string) {
    super(code, message, { httpStatus: 400 });
  }
}

export type AuthDecision<T> = { ok: true; context: T } | { ok: false };

export interface HandshakeOptions<T> {
  timeoutMs: number;
  /** 'password': RFC 1929 is required. 'none': only "no authentication" is offered (whitelist ports). */
  auth: 'password' | 'none';
  /** acceptSocks5 only: decides the RFC 1929 credentials; not called for auth 'none'. */
  authenticate?: (username: string, password: string) => AuthDecision<T> | Promise<AuthDecision<T>>;
  /**
   * acceptSocks5 only: with auth 'password', a client that offers "no authentication" but not user/password
   * (a browser) is asked about here; ok lets it on without credentials (its context as if authenticated). A
   * client offering user/password always authenticates with it.
   */
  noAuth?: () => AuthDecision<T>;
  /**
   * startSocks5: with auth 'password', a client that offers "no authentication" but not user/password pauses
   * the handshake at a login step without credentials (instead of being refused at once).
   */
  anonymous?: boolean;
  /**
   * Leave the socket flowing after the request instead of pausing it. Only for a caller that attaches its
   * own 'data' reader as soon as the promise settles (Rotor's listener: holdClient, then the relay): no
   * chunk can arrive before then (that takes an I/O turn, the continuation is a microtask), and a paused
   * socket would cost a resume (a nextTick and a stream pass) per connection. Default false: paused.
   */
  keepReading?: boolean;
  /** Accept UDP ASSOCIATE (command 3, RFC 1928 §7) besides CONNECT; the request says which (`command`). */
  udp?: boolean;
}

export interface ConnectRequest<T, O = unknown> {
  kind: 'request';
  /** What startSocks5 was given as the connection's owner. */
  owner?: O | undefined;
  host: string;
  port: number;
  /** 1 IPv4, 3 domain name, 4 IPv6 */
  addressType: 1 | 3 | 4;
  username: string;
  context: T | undefined;
  /** Bytes the client sent after its request, before our reply; hand them on to the upstream. */
  head: Buffer | null;
  /** 1 CONNECT, 3 UDP ASSOCIATE (only with `udp`; host:port is then where the client will send from, 0 = unknown). */
  command?: 1 | 3;
}

const enum Stage {
  Greeting,
  Auth,
  Authenticating,
  Request,
  Done,
}

// Greeting, auth and request together are under 800 bytes; the rest allows a client that pipelines its first
// payload (a TLS ClientHello) behind the request while authentication is still being decided.
const MAX_HANDSHAKE_BYTES = 16 * 1024;

/**
 * The handshake paused for the caller's decision: the client's RFC 1929 credentials (or, with `anonymous`,
 * a client that offered none). Nothing is answered until resume(); the handshake's timeout keeps running.
 */
export interface Socks5Login<T, O = unknown> {
  readonly kind: 'login';
  /** What startSocks5 was given as the connection's owner. */
  readonly owner: O | undefined;
  /** false: the client offered only "no authentication" (username and password are ''). */
  readonly credentials: boolean;
  readonly username: string;
  readonly password: string;
  /** Answers the login with the decision and reads on: the request, or a typed failure (refused, or the client left meanwhile). */
  resume(decision: AuthDecision<T>): Promise<Socks5Step<T, O>>;
  /** Rejects once the handshake fails while paused (the client left, stalled or flooded): for a decision that may never come. */
  failed(): Promise<never>;
}

/** Where a handshake stands when its promise settles: paused at the login, or done with the request. */
export type Socks5Step<T, O = unknown> = Socks5Login<T, O> | ConnectRequest<T, O>;

/**
 * Runs the handshake up to the login (RFC 1929, or a client offering no credentials with `anonymous`) or,
 * without one, to the CONNECT request; a login step is resumed with the caller's decision. The caller then
 * dials and answers with writeReply(). On failure the socket has been answered where the protocol allows it,
 * and destroyed. `authenticate` and `noAuth` are not called (they are acceptSocks5's). `owner` comes back on
 * every step and failure (a caller's one reaction for all its handshakes finds its connection there).
 */
export function startSocks5<T = undefined, O = unknown>(
  socket: Socket,
  options: HandshakeOptions<T>,
  owner?: O,
): Promise<Socks5Step<T, O>> {
  starting = new ServerHandshake<T, O>(socket, options, owner) as unknown as Binding;
  return new Promise<Socks5Step<T, O>>(bindHandshake as (resolve: (step: Socks5Step<T, O>) => void, reject: (err: Error) => void) => void);
}

/** The handshake being started (set just before its promise's executor runs, synchronously, and read by it). */
let starting: Binding | undefined;

interface Binding {
  bind(resolve: (step: Socks5Step<unknown, unknown>) => void, reject: Fail): void;
}

/** The executor of a handshake's first promise and of each resume(): no closure per step. */
function bindHandshake(resolve: (step: Socks5Step<unknown, unknown>) => void, reject: (err: Error) => void): void {
  const h = starting!;
  starting = undefined;
  h.bind(resolve, reject);
}

/**
 * The whole handshake with the login decided by `options.authenticate` (and `noAuth`): for callers whose
 * decision is a function at hand (the sandbox's upstreams, tests). Rotor's listener uses startSocks5.
 */
export async function acceptSocks5<T = undefined>(socket: Socket, options: HandshakeOptions<T>): Promise<ConnectRequest<T>> {
  const noAuth = options.noAuth;
  let step = await startSocks5<T>(socket, noAuth ? { ...options, anonymous: true } : options);
  while (step.kind === 'login')
    step = await step.resume(await Promise.race([decideLogin(step, options.authenticate, noAuth), step.failed()]));
  return step;
}

async function decideLogin<T>(
  login: Socks5Login<T>,
  authenticate: HandshakeOptions<T>['authenticate'],
  noAuth: HandshakeOptions<T>['noAuth'],
): Promise<AuthDecision<T>> {
  try {
    if (!login.credentials) return noAuth ? noAuth() : { ok: false };
    return authenticate ? await authenticate(login.username, login.password) : { ok: false };
  } catch {
    return { ok: false };
  }
}

/** What a server handshake's step gives (Socks5ServerSteps): more bytes needed, a login to decide, the request, or a failure. */
export const MORE = 0;
export const LOGIN = 1;
export const REQUEST = 2;
export const FAILED = 3;
export type HandshakeProgress = typeof MORE | typeof LOGIN | typeof REQUEST | typeof FAILED;

/**
 * The server side of the handshake as data (no socket, no timer, nobody called back): fed the client's bytes,
 * it says what they amount to — more needed, the login to decide (then decide()), the request, or a failure —
 * and leaves the bytes to write now in `out`. Whoever owns the socket writes, decides and closes: Rotor's SOCKS5
 * listener drives it from its own listeners (src/proxy/socks5.ts), startSocks5 from this module's.
 */
export class Socks5ServerSteps<T> {
  /** false: the client offered only "no authentication" (username and password are ''). */
  credentials = true;
  username = '';
  password = '';
  /** Bytes to write to the client now (a method choice, the auth answer), or null. */
  out: Buffer | null = null;
  /** The request, once REQUEST was answered. */
  request: ConnectRequest<T> | undefined = undefined;
  /** The failure, once FAILED was answered: its code and message, and `answer` to end the socket with (else destroy it). */
  failure: HandshakeFailure | undefined = undefined;
  message = '';
  answer: Buffer | null = null;
  private stage = Stage.Greeting;
  private buffer: Buffer = EMPTY;
  private context: T | undefined;

  constructor(private readonly options: HandshakeOptions<T>) {}

  /** Whether it ended (the request taken, or failed). */
  get done(): boolean {
    return this.stage === Stage.Done;
  }

  /** The client's bytes. */
  feed(chunk: Buffer): HandshakeProgress {
    this.out = null;
    // Ended: nothing more is read (the owner has stopped feeding it).
    if (this.stage === Stage.Done) return MORE;
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    if (this.buffer.length > MAX_HANDSHAKE_BYTES && this.stage !== Stage.Request) {
      return this.fail('TOO_LARGE', `handshake larger than ${MAX_HANDSHAKE_BYTES} bytes`);
    }
    return this.advance();
  }

  /** The handshake fails from outside (the client closed, the deadline passed); MORE if it had ended already. */
  end(code: HandshakeFailure, message: string): HandshakeProgress {
    this.out = null;
    if (this.stage === Stage.Done) return MORE;
    return this.fail(code, message);
  }

  /** The login's decision (after LOGIN): the handshake goes on — with the request when the client already sent it. */
  decide(decision: AuthDecision<T>): HandshakeProgress {
    this.out = null;
    if (this.stage !== Stage.Authenticating) return MORE;
    if (this.credentials) {
      this.password = '';
      if (!decision.ok) return this.fail('AUTH_FAILED', 'authentication failed', Buffer.from([AUTH_VERSION, 0x01]));
      this.out = AUTH_OK;
    } else {
      if (!decision.ok) return this.fail('NO_ACCEPTABLE_METHOD', 'client offers no acceptable method', Buffer.from([SOCKS_VERSION, 0xff]));
      this.out = CHOSE_NONE;
    }
    this.context = decision.context;
    this.stage = Stage.Request;
    return this.advance();
  }

  private fail(code: HandshakeFailure, message: string, answer?: Buffer): HandshakeProgress {
    this.stage = Stage.Done;
    this.failure = code;
    this.message = message;
    this.answer = answer ?? null;
    this.buffer = EMPTY;
    return FAILED;
  }

  private advance(): HandshakeProgress {
    while (this.stage !== Stage.Done && this.stage !== Stage.Authenticating) {
      const consumed = this.step();
      // step() moves the stage on.
      const stage = this.stage as Stage;
      if (stage === Stage.Done) return this.failure !== undefined ? FAILED : REQUEST;
      if (stage === Stage.Authenticating) {
        this.consume(consumed);
        return LOGIN;
      }
      if (consumed === 0) return MORE;
      this.consume(consumed);
    }
    return MORE;
  }

  /** Drops a handled message; a client that waits for each answer sent exactly one, and leaves no view to make. */
  private consume(n: number): void {
    const buffer = this.buffer;
    this.buffer = n === buffer.length ? EMPTY : buffer.subarray(n);
  }

  /** Handles one message at the current stage; returns the bytes it consumed, 0 when more are needed. */
  private step(): number {
    const buffer = this.buffer;
    const options = this.options;
    switch (this.stage) {
      case Stage.Greeting: {
        if (buffer.length < 2) return 0;
        if (buffer[0] !== SOCKS_VERSION) {
          this.fail('BAD_VERSION', `unsupported SOCKS version ${buffer[0]}`);
          return 0;
        }
        const n = buffer[1]!;
        if (n === 0) {
          this.fail('NO_ACCEPTABLE_METHOD', 'no authentication methods offered', Buffer.from([SOCKS_VERSION, 0xff]));
          return 0;
        }
        if (buffer.length < 2 + n) return 0;
        const wanted = options.auth === 'password' ? 0x02 : 0x00;
        const offered = offers(buffer, n, wanted);
        if (wanted === 0x02 && !offered && offers(buffer, n, 0x00) && options.anonymous) {
          // Paused: decide() says whether a client without credentials may go on.
          this.credentials = false;
          this.stage = Stage.Authenticating;
          return 2 + n;
        }
        if (!offered) {
          this.fail('NO_ACCEPTABLE_METHOD', 'client offers no acceptable method', Buffer.from([SOCKS_VERSION, 0xff]));
          return 0;
        }
        this.out = wanted === 0x02 ? CHOSE_PASSWORD : CHOSE_NONE;
        this.stage = wanted === 0x02 ? Stage.Auth : Stage.Request;
        return 2 + n;
      }
      case Stage.Auth: {
        if (buffer.length < 2) return 0;
        if (buffer[0] !== AUTH_VERSION) {
          this.fail('BAD_AUTH_VERSION', `unsupported auth version ${buffer[0]}`, Buffer.from([AUTH_VERSION, 0x01]));
          return 0;
        }
        const ulen = buffer[1]!;
        if (buffer.length < 3 + ulen) return 0;
        const plen = buffer[2 + ulen]!;
        if (buffer.length < 3 + ulen + plen) return 0;
        this.username = buffer.toString('utf8', 2, 2 + ulen);
        this.password = buffer.toString('utf8', 3 + ulen, 3 + ulen + plen);
        // Paused: decide() answers the login with the caller's decision.
        this.stage = Stage.Authenticating;
        return 3 + ulen + plen;
      }
      case Stage.Request:
        return this.parseRequest(buffer);
      default:
        return 0;
    }
  }

  /** The CONNECT (or UDP ASSOCIATE) request: `request` set and the stage Done, or a failure; 0 when more bytes are needed. */
  private parseRequest(buffer: Buffer): number {
    const options = this.options;
    if (buffer.length < 5) return 0;
    if (buffer[0] !== SOCKS_VERSION) {
      this.fail('BAD_VERSION', `unsupported SOCKS version ${buffer[0]} in request`);
      return 0;
    }
    const command = buffer[1];
    if (command !== 0x01 && !(command === 0x03 && options.udp)) {
      this.fail('BAD_COMMAND', `unsupported command ${buffer[1]}`, replyBuffer(REPLY.commandNotSupported));
      return 0;
    }
    const atyp = buffer[3];
    let host: string;
    let end: number;
    if (atyp === 0x01) {
      end = 4 + 4 + 2;
      if (buffer.length < end) return 0;
      host = `${buffer[4]}.${buffer[5]}.${buffer[6]}.${buffer[7]}`;
    } else if (atyp === 0x04) {
      end = 4 + 16 + 2;
      if (buffer.length < end) return 0;
      const parts: string[] = [];
      for (let i = 0; i < 8; i++) parts.push(buffer.readUInt16BE(4 + i * 2).toString(16));
      host = parts.join(':');
    } else if (atyp === 0x03) {
      const len = buffer[4]!;
      if (len === 0) {
        this.fail('BAD_ADDRESS', 'empty domain name', replyBuffer(REPLY.addressTypeNotSupported));
        return 0;
      }
      end = 5 + len + 2;
      if (buffer.length < end) return 0;
      host = buffer.toString('latin1', 5, 5 + len);
      if (!/^[A-Za-z0-9._-]+$/.test(host)) {
        this.fail('BAD_ADDRESS', 'malformed domain name', replyBuffer(REPLY.generalFailure));
        return 0;
      }
    } else {
      this.fail('BAD_ADDRESS', `unsupported address type ${atyp}`, replyBuffer(REPLY.addressTypeNotSupported));
      return 0;
    }
    const port = buffer.readUInt16BE(end - 2);
    if (port === 0 && command === 0x01) {
      // A malformed request (like the HTTP listener's 400), not a statement about reachability.
      this.fail('BAD_ADDRESS', 'port 0', replyBuffer(REPLY.generalFailure));
      return 0;
    }
    const rest = buffer.length > end ? Buffer.from(buffer.subarray(end)) : null;
    this.stage = Stage.Done;
    this.buffer = EMPTY;
    const request: ConnectRequest<T> = {
      kind: 'request',
      host,
      port,
      addressType: atyp as 1 | 3 | 4,
      username: this.username,
      context: this.context,
      head: rest,
    };
    if (command === 0x03) request.command = 0x03;
    this.request = request;
    return 0;
  }
}

/** Whether a greeting's n methods (from byte 2) include `method`: read in place, no view of the bytes. */
function offers(greeting: Buffer, n: number, method: number): boolean {
  for (let i = 2; i < 2 + n; i++) if (greeting[i] === method) return true;
  return false;
}

/**
 * A failed handshake's socket: answered where the protocol allows it (and destroyed a second later if the client
 * does not close), else destroyed; a no-op error listener stays (the peer may reset while we answer).
 */
export function closeFailedHandshake(socket: Socket, answer: Buffer | null): void {
  socket.on('error', noop);
  if (answer && socket.writable) socket.end(answer);
  else socket.destroy();
  if (answer) setTimeout(destroySocket, 1000, socket).unref();
}

/**
 * The handshake a socket belongs to (its slot's field, socket-slot.ts), for the shared listeners below (one set for
 * every connection, no closures).
 */
function handshakeOf(socket: Socket): HandshakeSteps | undefined {
  return slotIf(socket)?.handshake as HandshakeSteps | undefined;
}

/** What the shared listeners and the timer call on the handshake they belong to. */
interface HandshakeSteps {
  data(chunk: Buffer): void;
  fail(code: HandshakeFailure, message: string): void;
}

type Settle<T, O> = ((step: Socks5Step<T, O>) => void) | undefined;
type Fail = ((err: Error) => void) | undefined;

/**
 * startSocks5's handshake: Socks5ServerSteps driven from a socket, with a promise per step. One object per
 * connection; paused at the login, it is itself the login step. Its listeners and its timer are module functions.
 */
class ServerHandshake<T, O> implements HandshakeSteps, Socks5Login<T, O> {
  readonly kind = 'login';
  private resolve: Settle<T, O> = undefined;
  private reject: Fail = undefined;
  /** The step being bound came from resume() (the first one starts the handshake). */
  private started = false;
  private readonly steps: Socks5ServerSteps<T>;
  private timer: NodeJS.Timeout | undefined;
  /** Why it failed while paused at the login (no promise pending): resume() answers with it. */
  private failure: Socks5HandshakeError | undefined;
  private onFailure: Fail;
  /** The decision resume() goes on with (read by bind(), in the same turn). */
  private decision: AuthDecision<T> | undefined;

  constructor(
    private readonly socket: Socket,
    private readonly options: HandshakeOptions<T>,
    readonly owner: O | undefined,
  ) {
    this.steps = new Socks5ServerSteps<T>(options);
  }

  get credentials(): boolean {
    return this.steps.credentials;
  }

  get username(): string {
    return this.steps.username;
  }

  get password(): string {
    return this.steps.password;
  }

  /** A step's promise is made (startSocks5 or resume): the handshake starts, or goes on with the decision. */
  bind(resolve: Settle<T, O>, reject: Fail): void {
    this.resolve = resolve;
    this.reject = reject;
    if (!this.started) {
      this.started = true;
      this.start();
      return;
    }
    const decision = this.decision!;
    this.decision = undefined;
    this.progress(this.steps.decide(decision));
  }

  resume(decision: AuthDecision<T>): Promise<Socks5Step<T, O>> {
    if (this.failure) return Promise.reject(this.failure);
    this.decision = decision;
    starting = this as unknown as Binding;
    return new Promise<Socks5Step<T, O>>(
      bindHandshake as (resolve: (step: Socks5Step<T, O>) => void, reject: (err: Error) => void) => void,
    );
  }

  failed(): Promise<never> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((_, reject) => (this.onFailure = reject));
  }

  /** Settles the pending promise with the login (this) or the request; the handshake waits for resume() after a login. */
  private settle(step: Socks5Step<T, O>): void {
    const resolve = this.resolve;
    this.resolve = undefined;
    this.reject = undefined;
    resolve?.(step);
  }

  start(): void {
    const socket = this.socket;
    this.timer = setTimeout(onHandshakeTimeout, this.options.timeoutMs, this);
    slotOf(socket).handshake = this;
    socket.on('data', onData);
    // on(), not once(): cleanup() removes them (once() would wrap each in a new function per connection).
    socket.on('close', onClose);
    // A half-open client (FIN sent) will never finish its handshake.
    socket.on('end', onClose);
    socket.on('error', onError);
  }

  private cleanup(): void {
    clearTimeout(this.timer);
    const socket = this.socket;
    slotOf(socket).handshake = undefined;
    socket.off('data', onData);
    socket.off('close', onClose);
    socket.off('end', onClose);
    socket.off('error', onError);
  }

  fail(code: HandshakeFailure, message: string): void {
    this.progress(this.steps.end(code, message));
  }

  data(chunk: Buffer): void {
    this.progress(this.steps.feed(chunk));
  }

  /** Acts on a step: writes what it says, settles the login or the request, or fails. */
  private progress(p: HandshakeProgress): void {
    const steps = this.steps;
    const socket = this.socket;
    if (steps.out !== null) socket.write(steps.out);
    if (p === MORE) return;
    if (p === LOGIN) return this.settle(this);
    this.cleanup();
    if (p === REQUEST) {
      // Hold further client bytes in the socket until the caller's relay reads them.
      if (!this.options.keepReading) socket.pause();
      socket.on('error', noop);
      const request = steps.request as ConnectRequest<T, O>;
      request.owner = this.owner;
      return this.settle(request);
    }
    closeFailedHandshake(socket, steps.answer);
    const err = new Socks5HandshakeError(steps.failure!, steps.message);
    err.owner = this.owner;
    const reject = this.reject;
    this.resolve = undefined;
    this.reject = undefined;
    if (reject) return reject(err);
    this.failure = err;
    this.onFailure?.(err);
  }
}

const EMPTY = Buffer.alloc(0);

function onData(this: Socket, chunk: Buffer): void {
  handshakeOf(this)?.data(chunk);
}
function onClose(this: Socket): void {
  handshakeOf(this)?.fail('CLOSED', 'client closed during the handshake');
}
function onError(this: Socket): void {
  handshakeOf(this)?.fail('CLOSED', 'client connection failed during the handshake');
}
function onHandshakeTimeout(h: HandshakeSteps): void {
  h.fail('TIMEOUT', 'handshake timed out');
}
function destroySocket(socket: Socket): void {
  socket.destroy();
}

function noop(): void {}

// The answers every handshake writes, shared (a written buffer is never changed afterwards).
const CHOSE_PASSWORD = Buffer.from([SOCKS_VERSION, 0x02]);
const CHOSE_NONE = Buffer.from([SOCKS_VERSION, 0x00]);
const AUTH_OK = Buffer.from([AUTH_VERSION, 0x00]);
const ZERO_BIND = Buffer.from([SOCKS_VERSION, 0, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
/** The reply of every successful CONNECT (bound address 0.0.0.0:0), written as is: never modified. */
const SUCCEEDED = Buffer.from(ZERO_BIND);

/** The reply to a CONNECT request. The bound address is reported as 0.0.0.0:0 unless given. */
export function replyBuffer(code: ReplyCode, bound?: { host: string; port: number }): Buffer {
  if (!bound) {
    const b = Buffer.from(ZERO_BIND);
    b[1] = code;
    return b;
  }
  const v4 = ipv4Value(bound.host);
  if (v4 >= 0) {
    const b = Buffer.alloc(10);
    b[0] = SOCKS_VERSION;
    b[1] = code;
    b[3] = 0x01;
    b.writeUInt32BE(v4, 4);
    b.writeUInt16BE(bound.port, 8);
    return b;
  }
  if (isIPv6(bound.host)) {
    const b = Buffer.alloc(22);
    b[0] = SOCKS_VERSION;
    b[1] = code;
    b[3] = 0x04;
    ipv6Bytes(bound.host).copy(b, 4);
    b.writeUInt16BE(bound.port, 20);
    return b;
  }
  const b = replyBuffer(code);
  return b;
}

/** Answers the CONNECT request; on failure codes the socket is ended after the reply. */
export function writeReply(socket: Socket, code: ReplyCode, bound?: { host: string; port: number }): void {
  if (code === REPLY.succeeded) {
    socket.write(bound ? replyBuffer(code, bound) : SUCCEEDED);
    return;
  }
  const reply = replyBuffer(code, bound);
  if (socket.writable) socket.end(reply);
  setTimeout(() => socket.destroy(), 1000).unref();
}
