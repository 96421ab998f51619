// A dedicated port per user (docs/reference.md "Users as data", `listen`): one socket speaking HTTP and SOCKS5
// (src/users/handover.ts tells them apart), bound to proxy.http.host. Clients from the user's `allowIps` are
// served as that user without credentials (browsers cannot send proxy credentials from their command line
// and never do SOCKS5 authentication); credentials, with user-name options, are accepted as on the shared
// listeners. The listeners themselves are the shared ones: they ask `admit(socket)` when a client brings no
// credentials, and only sockets that came through a user port are admitted that way.
//
// With `listen.tls` the port speaks TLS only (1.2+, the certificate and key of proxy.https, renewed with it on
// SIGHUP); HTTP or SOCKS5 is told apart inside the TLS connection, so credentials never cross in clear.
//
// `sync(users)` makes the open ports match the users: a new `listen` opens a port, a removed one (or a
// removed user) closes it and its connections, a changed port moves, a changed allowIps applies to the next
// connection. The composition root calls it at start and on reload. `update(changed, gone)` does the same for
// the users a burst of changes named, and looks at no other user (an import of 100,000 users in bursts of
// 1,000 walked every user per burst): only the ports that could not be opened are tried again with it.
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type SecureContextOptions, type Server as TlsServer, type TLSSocket } from 'node:tls';
import { RotorError } from '../errors/rotor-error.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Authorization } from '../proxy/router.ts';
import { CidrSet } from '../proxy/cidr.ts';
import { descriptorGuard } from '../proxy/accept-guard.ts';
import { reportFailedAccept } from '../errors/failed-accept.ts';
import { sniffAndHandOver, type HandoverTargets } from './handover.ts';
import { LiveList, type Listed } from '../connlog/live-list.ts';

/** The fields of a user this needs (src/proxy/types.ts LocalUser fits). */
export interface PortUser {
  name: string;
  listen?: { port: number; allowIps: readonly string[]; tls?: boolean | undefined } | null | undefined;
}

export interface UserPortsOptions {
  /** proxy.http.host */
  host: string;
  /** Where sniffed sockets go (the shared listeners). */
  listeners: HandoverTargets;
  /** Admission of a user let in by address (Router.authorizeUser). */
  authorizeUser: (name: string) => Authorization;
  /** Bound on the client's first bytes (and on the TLS handshake). Default 10000 ms. */
  handshakeTimeoutMs?: number;
  /** The certificate and key TLS ports serve (proxy.https's, as read now); undefined = none configured. */
  certificate?: () => SecureContextOptions | undefined;
  logger?: Logger;
}

export interface UserPortsReport {
  opened: Array<{ user: string; port: number }>;
  closed: Array<{ user: string; port: number }>;
  failed: Array<{ user: string; port: number; error: string }>;
}

interface Entry {
  user: string;
  /** as configured (0 = any free port) */
  requested: number;
  port: number;
  allow: CidrSet;
  allowIps: readonly string[];
  tls: boolean;
  server: Server;
  /** The server's close, asked once (a second server.close() after its 'close' would never call back). */
  closing: Promise<void> | undefined;
  /** Its open connections (a live list, not a Set: src/connlog/live-list.ts says why). */
  sockets: LiveList<PortSocket>;
}

/**
 * A connection of a user port, as its port's live list holds it: the accepted socket, and on a TLS port also
 * the TLS socket once its handshake is done (`secure`), which is what is sniffed and handed over.
 */
class PortSocket implements Listed<PortSocket> {
  prevLive: PortSocket | null = null;
  nextLive: PortSocket | null = null;
  /** Handed over to a shared listener: from then on that listener's drain ends it at a stop. */
  handed = false;
  constructor(
    readonly socket: Socket,
    readonly secure = false,
  ) {}
}

type Wanted = { port: number; allowIps: readonly string[]; tls?: boolean | undefined };

const TLS_MIN_VERSION = 'TLSv1.2';

export class UserPorts {
  private readonly entries = new Map<string, Entry>();
  /** sockets accepted on a user port -> that port's entry */
  private readonly origin = new WeakMap<Socket, Entry>();
  /**
   * The ports wanted that could not be opened (in use, TLS without a certificate): tried again by every sync
   * and update, as a walk of every user tried them. At most one per user with a `listen`.
   */
  private readonly failed = new Map<string, Wanted>();
  private readonly handshakeTimeoutMs: number;
  private syncing: Promise<unknown> = Promise.resolve();
  /** Set by stopAccepting(): no port opens any more. */
  private stopped = false;

  constructor(private readonly options: UserPortsOptions) {
    this.handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
  }

  /** Opens, moves and closes ports to match `users`; calls are queued, never interleaved. Never rejects. */
  sync(users: Iterable<PortUser>): Promise<UserPortsReport> {
    const list = [...users];
    const run = this.syncing.then(() => this.syncNow(list));
    this.syncing = run.catch(() => undefined);
    return run;
  }

  /**
   * Opens, moves and closes the ports of the users a burst of changes named, and of no other user: `changed`
   * as they are now, `gone` the names removed (or no longer ready). Queued with sync. Never rejects.
   */
  update(changed: Iterable<PortUser>, gone: Iterable<string>): Promise<UserPortsReport> {
    const named = new Map<string, Wanted | undefined>();
    for (const name of gone) named.set(name, undefined);
    for (const u of changed) named.set(u.name, u.listen ?? undefined);
    const run = this.syncing.then(() => this.apply(named, false));
    this.syncing = run.catch(() => undefined);
    return run;
  }

  /**
   * The listeners' admission without credentials: the user of the port the socket came in on, when the
   * client's address is in that user's allowIps; undefined otherwise (the listener asks for credentials).
   */
  admit(socket: Socket): Authorization | undefined {
    const entry = this.origin.get(socket);
    if (!entry || !entry.allow.has(socket.remoteAddress ?? '')) return undefined;
    return this.options.authorizeUser(entry.user);
  }

  /** Whether `socket` was accepted on a user port (the connection log names such connections). */
  owns(socket: Socket): boolean {
    return this.origin.has(socket);
  }

  /** The sockets accepted on user ports, as the listeners read them (src/proxy/tunnel-record.ts FromUserPort). */
  get sockets(): WeakMap<Socket, unknown> {
    return this.origin;
  }

  /** The ports open now. */
  list(): Array<{ user: string; port: number; allowIps: readonly string[]; tls: boolean }> {
    return [...this.entries.values()].map((e) => ({ user: e.user, port: e.port, allowIps: e.allowIps, tls: e.tls }));
  }

  /** TLS ports take the certificate as read now (after proxy.https's was read again); open connections keep theirs. */
  reloadTls(): void {
    const pair = this.options.certificate?.();
    if (pair === undefined) return;
    for (const e of this.entries.values()) if (e.tls) (e.server as TlsServer).setSecureContext({ ...pair, minVersion: TLS_MIN_VERSION });
  }

  portOf(user: string): number | undefined {
    return this.entries.get(user)?.port;
  }

  /**
   * The first step of a stop: every port stops accepting, and its connections that have not been handed to a
   * listener yet (no first byte, or a TLS handshake under way) are closed, as the shared listeners close their
   * silent ones. The connections already handed over are left to the listeners' drain, like those of the
   * shared ports (they get proxy.drainMs, and those it cuts are recorded as `shutdown`); close() ends what is
   * left after it. No port opens from now on.
   */
  async stopAccepting(): Promise<void> {
    this.stopped = true;
    await this.syncing;
    for (const e of this.entries.values()) {
      void this.serverClosed(e);
      this.closeSilent(e);
    }
  }

  /** Closes every port and its connections. */
  async close(): Promise<void> {
    this.stopped = true;
    await this.syncing;
    await Promise.all([...this.entries.values()].map((e) => this.closeEntry(e)));
    this.entries.clear();
    this.failed.clear();
  }

  private syncNow(users: PortUser[]): Promise<UserPortsReport> {
    const wanted = new Map<string, Wanted | undefined>();
    for (const u of users) if (u.listen) wanted.set(u.name, u.listen);
    // Every open port whose user no longer wants one.
    for (const user of this.entries.keys()) if (!wanted.has(user)) wanted.set(user, undefined);
    return this.apply(wanted, true);
  }

  /**
   * Makes the ports of the users named match what they want (undefined: no port). `whole`: they are every
   * user, so a failed port no longer named is dropped. Closes before it opens: a port one user left can be
   * taken by another in the same call.
   */
  private async apply(named: Map<string, Wanted | undefined>, whole: boolean): Promise<UserPortsReport> {
    const report: UserPortsReport = { opened: [], closed: [], failed: [] };
    // Stopping: the ports stay as they are until close() (their connections drain with the listeners').
    if (this.stopped) return report;
    if (whole) this.failed.clear();
    else for (const [user, want] of this.failed) if (!named.has(user)) named.set(user, want);
    for (const [user, want] of named) {
      const entry = this.entries.get(user);
      if (entry === undefined) continue;
      if (want && want.port === entry.requested && (want.tls === true) === entry.tls) {
        if (want.allowIps.join(',') !== entry.allowIps.join(',')) {
          entry.allow = new CidrSet(want.allowIps);
          entry.allowIps = [...want.allowIps];
        }
        continue;
      }
      this.entries.delete(user);
      await this.closeEntry(entry);
      report.closed.push({ user, port: entry.port });
    }
    for (const [user, want] of named) {
      this.failed.delete(user);
      if (want === undefined || this.entries.has(user)) continue;
      try {
        const entry = await this.open(user, want);
        this.entries.set(user, entry);
        report.opened.push({ user, port: entry.port });
      } catch (err) {
        this.failed.set(user, want);
        report.failed.push({ user, port: want.port, error: (err as Error).message });
      }
    }
    const log = this.options.logger;
    for (const o of report.opened) log?.info(o, 'user port opened');
    for (const c of report.closed) log?.info(c, 'user port closed');
    for (const f of report.failed) log?.error(f, 'user port could not be opened');
    return report;
  }

  private open(user: string, want: Wanted): Promise<Entry> {
    const { port: requested, allowIps } = want;
    const tls = want.tls === true;
    const server = tls ? this.tlsServer(user) : createServer({ allowHalfOpen: true });
    const entry: Entry = {
      user,
      requested,
      port: 0,
      allow: new CidrSet(allowIps),
      allowIps: [...allowIps],
      tls,
      server,
      closing: undefined,
      sockets: new LiveList(),
    };
    // The raw sockets (a TLS one's too): closed with the port.
    server.on('connection', (socket: Socket) => {
      socket.on('error', noop);
      const listed = this.listed(socket, entry, false);
      if (!tls) this.handOver(listed, entry);
    });
    if (tls) server.on('secureConnection', (socket: TLSSocket) => this.handOver(this.listed(socket, entry, true), entry));
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(requested, this.options.host, () => {
        server.off('error', reject);
        // Once listening, an error is a failed accept (EMFILE…): keep serving, say so.
        server.on('error', (err) => reportFailedAccept(true, err, `user port of ${user}`, this.options.logger));
        descriptorGuard.watch(server);
        entry.port = (server.address() as AddressInfo).port;
        resolve(entry);
      });
    });
  }

  /** `socket` onto its port's live list, off it at its close. */
  private listed(socket: Socket, entry: Entry, secure: boolean): PortSocket {
    const listed = new PortSocket(socket, secure);
    entry.sockets.add(listed);
    socket.once('close', () => entry.sockets.remove(listed));
    return listed;
  }

  private handOver(listed: PortSocket, entry: Entry): void {
    const socket = listed.socket;
    socket.on('error', noop);
    this.origin.set(socket, entry);
    sniffAndHandOver(socket, this.options.listeners, this.handshakeTimeoutMs, () => {
      listed.handed = true;
    });
  }

  /** A TLS port: refused (the port stays closed, the reason logged) when no certificate is configured. */
  private tlsServer(user: string): TlsServer {
    const pair = this.options.certificate?.();
    if (pair === undefined) throw new UserPortTlsError();
    const server = createTlsServer({
      ...pair,
      minVersion: TLS_MIN_VERSION,
      handshakeTimeout: this.handshakeTimeoutMs,
      // HTTP/1.1 (or SOCKS5, which offers no ALPN): the HTTP listener's parser speaks nothing else.
      ALPNProtocols: ['http/1.1'],
      allowHalfOpen: true,
    });
    server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
      // A plain client, an untrusting one, a stalled handshake: never fatal.
      this.options.logger?.debug({ user, code: err.code, reason: err.message }, 'user port tls handshake failed');
      socket.destroy();
    });
    return server;
  }

  private async closeEntry(entry: Entry): Promise<void> {
    const closed = this.serverClosed(entry);
    for (const s of entry.sockets) s.socket.destroy();
    await closed;
  }

  /** Stops the port accepting; resolves once its last connection has closed too. */
  private serverClosed(entry: Entry): Promise<void> {
    entry.closing ??= new Promise<void>((resolve) => entry.server.close(() => resolve()));
    return entry.closing;
  }

  /**
   * Closes the port's connections no listener has taken yet. On a TLS port the accepted socket of a connection
   * whose TLS socket was handed over stays (closing it would close the TLS one); the two are matched by the
   * client's address and port, once, here.
   */
  private closeSilent(entry: Entry): void {
    let handedTls: Set<string> | undefined;
    if (entry.tls) {
      handedTls = new Set();
      for (const s of entry.sockets) if (s.secure && s.handed) handedTls.add(peerOf(s.socket));
    }
    for (const s of entry.sockets) {
      if (s.handed) continue;
      if (handedTls !== undefined && !s.secure && handedTls.has(peerOf(s.socket))) continue;
      s.socket.destroy();
    }
  }
}

/** A user's `listen.tls` with no certificate to serve (no proxy.https): the port is not opened. */
export class UserPortTlsError extends RotorError {
  constructor() {
    super('TLS_CONFIG', 'listen.tls: no certificate to serve; configure proxy.https (cert, key), whose pair user ports use');
  }
}

function noop(): void {}

/** The client's end of a connection (the same for a TLS socket and the socket it runs over). */
function peerOf(socket: Socket): string {
  return `${socket.remoteAddress ?? ''} ${socket.remotePort ?? ''}`;
}
