// TLS to an upstream proxy whose line says `https://` (a node with `tls: true`): the TCP connect of an
// upstream dial becomes a TLS connect, and the HTTP CONNECT or forwarded request then runs inside it as on a
// plain node (upstream-dial.ts calls connectUpstream and waits for its `readyEvent`). The certificate is
// verified against the system's CAs (plus pool.tls.caFile) unless pool.tls.verify is false or the route's
// product is in pool.tls.insecureProducts (providers with self-signed gateways); each node dialed without
// verification is logged once. Sessions are resumed per node, so a repeat dial costs one round trip less.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { isIP, type Socket } from 'node:net';
import { connect as tlsConnect, rootCertificates, type TLSSocket } from 'node:tls';
import type { FailureReason, UpstreamNode } from '../pool/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import { UpstreamDialError } from './errors.ts';
import { TlsConfigError } from './https-listener.ts';

/** How one dial to a TLS node checks the node's certificate. */
export interface UpstreamTls {
  verify: boolean;
  /** CA certificates (PEM) trusted; undefined = node's default (the system's). */
  ca?: readonly (string | Buffer)[] | undefined;
  /** Told when a node's certificate is refused (the policy logs it once per node). */
  refused?: ((node: UpstreamNode, reason: string) => void) | undefined;
}

export interface UpstreamTlsSettings {
  /** pool.tls.verify */
  verify: boolean;
  /** pool.tls.insecureProducts */
  insecureProducts: readonly string[];
  /** pool.tls.caFile ('' = the system's CAs only) */
  caFile?: string;
}

/**
 * The TLS policy of the upstream dials: one object per daemon, `set` again on reload. `forProduct` is called
 * only for nodes with `tls` (never on a plain node's dial) and returns shared objects.
 */
export class UpstreamTlsPolicy {
  private strict: UpstreamTls = { verify: true, refused: (node, reason) => this.refused(node, reason) };
  private readonly lax: UpstreamTls = { verify: false };
  private insecure = new Set<string>();
  private verifyAll = true;
  /** Nodes dialed without verification and already logged. */
  private readonly logged = new WeakSet<UpstreamNode>();
  /** Nodes whose certificate was refused and already logged. */
  private readonly loggedRefusals = new WeakSet<UpstreamNode>();

  constructor(
    settings: UpstreamTlsSettings,
    private readonly logger?: Logger,
  ) {
    this.set(settings);
  }

  /** Takes the settings at start (a caFile read before the daemon serves). A caFile that cannot be read throws, naming the key. */
  set(settings: UpstreamTlsSettings): void {
    this.apply(settings, settings.caFile ? caFileRead(settings.caFile, () => readFileSync(settings.caFile!)) : undefined);
  }

  /** Takes new settings while the daemon serves (reload): the caFile read off the event loop. */
  async reload(settings: UpstreamTlsSettings): Promise<void> {
    (await this.prepare(settings))();
  }

  /**
   * Reads what new settings need (the caFile, off the event loop; unreadable = throws, naming the key) and
   * returns their application, so a reload can read every file before it changes anything.
   */
  async prepare(settings: UpstreamTlsSettings): Promise<() => void> {
    let pem: Buffer | undefined;
    if (settings.caFile) {
      try {
        pem = await readFile(settings.caFile);
      } catch (err) {
        throw caFileError(settings.caFile, err);
      }
    }
    return () => this.apply(settings, pem);
  }

  private apply(settings: UpstreamTlsSettings, pem: Buffer | undefined): void {
    const ca: Array<string | Buffer> | undefined = pem ? [...rootCertificates, pem] : undefined;
    const refused = (node: UpstreamNode, reason: string): void => this.refused(node, reason);
    this.strict = ca ? { verify: true, ca, refused } : { verify: true, refused };
    this.verifyAll = settings.verify;
    this.insecure = new Set(settings.insecureProducts);
  }

  /** The check for a dial of `node` on behalf of a route drawing from `productNo`. */
  forDial(node: UpstreamNode, productNo: string): UpstreamTls {
    const tls = this.decide(node, productNo);
    // Health probes of the node (which know no route) check it the same way: see connectTls.
    if (lastCheck.get(node) !== tls) lastCheck.set(node, tls);
    return tls;
  }

  private refused(node: UpstreamNode, reason: string): void {
    if (this.loggedRefusals.has(node)) return;
    this.loggedRefusals.add(node);
    this.logger?.warn({ node: node.id, reason }, 'upstream TLS certificate refused');
  }

  private decide(node: UpstreamNode, productNo: string): UpstreamTls {
    if (this.verifyAll && !this.insecure.has(productNo)) return this.strict;
    if (!this.logged.has(node)) {
      this.logged.add(node);
      this.logger?.warn({ node: node.id, product: productNo }, 'upstream TLS certificate not verified (pool.tls)');
    }
    return this.lax;
  }
}

/** The event upstream-dial.ts waits for before the proxy handshake: TCP connected, or TLS established. */
export function readyEvent(node: UpstreamNode): 'connect' | 'secureConnect' {
  return node.tls === true ? 'secureConnect' : 'connect';
}

/** The check the last client dial of a node used (UpstreamTlsPolicy.forDial), for dials that know no route. */
const lastCheck = new WeakMap<UpstreamNode, UpstreamTls>();

/**
 * Last TLS session per node (resumption), with the check it was made under: a resumed session skips the
 * certificate check, so it is reused only under the very same check (set() makes a new one on reload).
 */
const sessions = new WeakMap<UpstreamNode, { check: UpstreamTls | undefined; session: Buffer }>();

/**
 * A TLS connection to `node` (its `readyEvent` is 'secureConnect'). `tls` undefined (a health probe): the
 * check the node's last client dial used, else verified with the system's CAs.
 */
export function connectTls(node: UpstreamNode, given: UpstreamTls | undefined): Socket {
  const tls = given ?? lastCheck.get(node);
  const kept = sessions.get(node);
  const session = kept !== undefined && kept.check === tls ? kept.session : undefined;
  const s: TLSSocket = tlsConnect({
    host: node.host,
    port: node.port,
    // SNI only for names (RFC 6066 forbids IP literals); the identity check still covers IP SANs.
    ...(isIP(node.host) === 0 ? { servername: node.host } : {}),
    rejectUnauthorized: tls?.verify ?? true,
    ...(tls?.ca ? { ca: tls.ca as Array<string | Buffer> } : {}),
    ...(session ? { session } : {}),
    minVersion: 'TLSv1.2',
    ALPNProtocols: ['http/1.1'],
  });
  s.on('session', (buf: Buffer) => sessions.set(node, { check: tls, session: buf }));
  return s;
}

/** A failed TLS dial as the pool hears it: a certificate the node should not present is the node's fault. */
export function tlsDialError(
  node: UpstreamNode,
  err: NodeJS.ErrnoException,
  classify: (err: NodeJS.ErrnoException) => FailureReason,
): UpstreamDialError {
  const where = `upstream ${node.host.includes(':') ? `[${node.host}]` : node.host}:${node.port}`;
  const code = err.code ?? '';
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME|UNABLE_TO_GET_ISSUER/.test(code) || /certificate/i.test(err.message)) {
    lastCheck.get(node)?.refused?.(node, code || err.message);
    return new UpstreamDialError('handshake', `${where}: TLS certificate refused (${code || err.message})`);
  }
  if (code.startsWith('ERR_SSL') || code.startsWith('ERR_TLS') || /SSL|TLS/.test(err.message)) {
    return new UpstreamDialError('handshake', `${where}: TLS handshake failed (${code || err.message})`);
  }
  return new UpstreamDialError(classify(err), `${where}: ${code || err.message}`);
}

function caFileError(file: string, err: unknown): TlsConfigError {
  return new TlsConfigError('pool.tls.caFile', `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`, err);
}

function caFileRead(file: string, read: () => Buffer): Buffer {
  try {
    return read();
  } catch (err) {
    throw caFileError(file, err);
  }
}
