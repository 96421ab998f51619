// The HTTP proxy over TLS ("HTTPS proxy": curl --proxy https://…, Chromium --proxy-server=https://…): a
// TLS server that terminates TLS and hands each secured socket to the plain HTTP listener, so users, options,
// destination rules, limits, metering and the connection log are exactly the plain listener's (one request
// handler, not a copy). TLS 1.2 and 1.3 only. The certificate and key are PEM files read at start and again on
// reload (SIGHUP); a reload that cannot read or parse them keeps the running certificate and says why.
import { readFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { createSecureContext, createServer, type SecureContextOptions, type Server, type TLSSocket } from 'node:tls';
import { RotorError } from '../errors/rotor-error.ts';
import { logFailedAccepts } from '../errors/failed-accept.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { boundPort, listenOn } from './listen.ts';
import { descriptorGuard } from './accept-guard.ts';

/** The certificate or key of `proxy.https` cannot be read or used; names the config key. */
export class TlsConfigError extends RotorError {
  readonly key: string;
  constructor(key: string, message: string, cause?: unknown) {
    super('TLS_CONFIG', `${key}: ${message}`, { cause });
    this.key = key;
  }
}

export interface HttpsListenerOptions {
  /** The plain HTTP listener that serves each socket once TLS is up (HttpListener.handleSocket). */
  http: { handleSocket(socket: Socket): void };
  /** Default 127.0.0.1; an IPv6 address (`::1`, `::`) is fine. */
  host?: string;
  /** 0 = any free port. */
  port: number;
  /** PEM file paths. */
  cert: string;
  key: string;
  /** Bound on the TLS handshake (config proxy.handshakeTimeoutMs). Default 10000 ms. */
  handshakeTimeoutMs?: number;
  /** The config section named in errors. Default `proxy.https`. */
  section?: string;
  metrics?: Metrics;
  logger?: Logger;
}

const MIN_VERSION = 'TLSv1.2';

/** Reads and checks the PEM pair; a TlsConfigError names the key that is wrong. */
export async function loadTlsPair(certFile: string, keyFile: string, section = 'proxy.https'): Promise<SecureContextOptions> {
  const read = async (file: string, key: string): Promise<Buffer> => {
    try {
      return await readFile(file);
    } catch (err) {
      throw new TlsConfigError(`${section}.${key}`, `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`, err);
    }
  };
  const [cert, key] = await Promise.all([read(certFile, 'cert'), read(keyFile, 'key')]);
  const pair: SecureContextOptions = { cert, key, minVersion: MIN_VERSION };
  try {
    // Parses both and checks that the key belongs to the certificate.
    createSecureContext(pair);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    const which = /key/i.test(why) && !/values mismatch/i.test(why) ? 'key' : 'cert';
    throw new TlsConfigError(`${section}.${which}`, `not a usable PEM certificate and key (${why})`, err);
  }
  return pair;
}

export class HttpsListener {
  private readonly server: Server;
  /** Sockets still in their TLS handshake (not yet the plain listener's): closed with the listener. */
  private readonly handshaking = new Map<string, Socket>();
  private readonly section: string;
  /** The certificate and key served now (users' TLS ports serve the same: src/users/ports.ts). */
  private pair: SecureContextOptions;

  /** `pair`: the certificate and key as loadTlsPair() read them (so a start fails before anything binds). */
  constructor(
    private readonly options: HttpsListenerOptions,
    pair: SecureContextOptions,
  ) {
    this.section = options.section ?? 'proxy.https';
    this.pair = pair;
    this.server = createServer({
      ...pair,
      minVersion: MIN_VERSION,
      handshakeTimeout: options.handshakeTimeoutMs ?? 10_000,
      // HTTP/1.1 only: the plain listener's parser speaks nothing else.
      ALPNProtocols: ['http/1.1'],
      allowHalfOpen: false,
    });
    logFailedAccepts(this.server, 'https proxy listener', options.logger);
    descriptorGuard.watch(this.server);
    this.server.on('connection', (raw: Socket) => {
      const peer = peerOf(raw);
      this.handshaking.set(peer, raw);
      raw.once('close', () => {
        if (this.handshaking.get(peer) === raw) this.handshaking.delete(peer);
      });
    });
    this.server.on('secureConnection', (socket: TLSSocket) => {
      // From here the socket is the plain listener's: its registry closes it on drain and shutdown.
      this.handshaking.delete(peerOf(socket));
      this.options.http.handleSocket(socket);
    });
    this.server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
      // A client that does not speak TLS 1.2+, offers no common cipher, or stalls: counted, never fatal.
      options.metrics?.connectionsTotal.inc({ listener: 'https', result: 'bad_request' });
      options.logger?.debug({ listener: 'https', code: err.code, reason: err.message }, 'tls handshake failed');
      socket.destroy();
    });
  }

  /** Reads the certificate and key (TlsConfigError when they are unusable) and makes the listener. */
  static async create(options: HttpsListenerOptions): Promise<HttpsListener> {
    return new HttpsListener(options, await loadTlsPair(options.cert, options.key, options.section));
  }

  listen(): Promise<{ host: string; port: number }> {
    return listenOn(this.server, this.options.port, this.options.host);
  }

  get port(): number {
    return boundPort(this.server);
  }

  /** The certificate and key served now (PEM contents, TLS 1.2+). */
  get certificate(): SecureContextOptions {
    return this.pair;
  }

  /**
   * Reads the PEM files again (or `files`, when the config names new ones) and serves new handshakes with
   * them; connections already up keep theirs. Rejects with TlsConfigError, the old certificate kept.
   */
  async reload(files?: { cert: string; key: string }): Promise<void> {
    const cert = files?.cert ?? this.options.cert;
    const key = files?.key ?? this.options.key;
    const pair = await loadTlsPair(cert, key, this.section);
    this.server.setSecureContext({ ...pair, minVersion: MIN_VERSION });
    this.pair = pair;
    this.options.cert = cert;
    this.options.key = key;
    this.options.logger?.info({ listener: 'https', cert }, 'tls certificate reloaded');
  }

  /**
   * Stops accepting and cuts handshakes in progress. Connections already handed over are closed by the
   * plain listener's own close (its drain period applies to them too).
   */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.handshaking.values()) s.destroy();
    await closed;
  }
}

/** A connection's peer address and port: the same on the raw socket and the TLS socket over it. */
function peerOf(socket: Socket): string {
  return `${socket.remoteAddress ?? ''}|${socket.remotePort ?? 0}`;
}
