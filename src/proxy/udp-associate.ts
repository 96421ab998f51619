// SOCKS5 UDP ASSOCIATE (RFC 1928 §7) on the SOCKS5 listener and users' own ports: each association gets a
// UDP port of Rotor's for the client and its own UDP ASSOCIATE on a SOCKS5 upstream (Router.dial in mode
// 'udp': the same pool, sticky session and retries as a tunnel, so a session's datagrams leave from its TCP
// exit). Datagrams are checked one by one: header well formed, FRAG 0 (fragments are dropped, as §7 allows),
// target well formed and allowed by the destination rules, the user's quota not spent; then passed on as they
// came (client and upstream speak the same header). Bytes of payload are metered both ways and recorded as
// the association's connection. It ends with either TCP control connection, after `idleTimeoutMs` without a
// datagram, or when the quota is spent. Bounded: associations per user, datagrams in flight per association.
// Whose datagrams it takes (RFC 1928 §7: DST.ADDR/DST.PORT of the request are where the client will send from):
// a non-zero DST.ADDR is the only source address taken, a non-zero DST.PORT the only source port; a zero
// address means the control connection's, a zero port the first datagram's from that address. Once the source
// is fixed a datagram from any other (a second port of the same address: a neighbour behind the client's NAT)
// is dropped unread and counted ('foreign'), and replies only ever go to the fixed source. A domain name as
// DST.ADDR names no source a datagram can be matched to: refused 0x08 (address type not supported).
// The user's rate (the bucket its TCP connections share) applies to datagrams too: over it they wait in the
// association's queue, which holds at most `maxPendingDatagrams` (with those in flight) and one second of the
// rate, so a datagram is late by about a second at most; beyond it they are dropped and counted. UDP has no
// backpressure to give, and a datagram held longer is worth little to DNS, QUIC or voice, which retry or
// adapt to loss themselves.
import { createSocket, type RemoteInfo, type Socket as UdpSocket } from 'node:dgram';
import { isIPv6, SocketAddress, type Socket } from 'node:net';
import type { ConnectionContext } from '../connlog/types.ts';
import { InternalError } from '../errors/rotor-error.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { REPLY, writeReply, type ConnectRequest } from '../wire/socks5.ts';
import { parseUdpHeader } from '../wire/socks5-udp.ts';
import { DialCancel } from './cancel.ts';
import { GatewayError } from './errors.ts';
import { checkTarget } from './target.ts';
import { UDP_UNSUPPORTED, refusedForUdp, relayOf } from './udp-dial.ts';
import type { Dialed, Route, Router } from './router.ts';
import { recordCarrying, recordNode } from './tunnel-record.ts';
import { MeteredStream } from './tunnel-stream.ts';
import type { RelayAttachment, RelayLimiter } from './types.ts';

/** Why a datagram was not passed on (label `reason` of rotor_udp_datagrams_dropped_total). */
export type DropReason = 'malformed' | 'fragment' | 'not_allowed' | 'foreign' | 'queue_full';
const DROP_REASONS: readonly DropReason[] = ['malformed', 'fragment', 'not_allowed', 'foreign', 'queue_full'];

export interface UdpSettings {
  /** Associations one user may hold at once (config proxy.udp.maxAssociationsPerUser). */
  maxAssociationsPerUser: number;
  /** Datagrams sent and not yet handed to the kernel, per association; more are dropped. */
  maxPendingDatagrams: number;
  /** An association without a datagram either way for this long ends. */
  idleTimeoutMs: number;
}

export class UdpAssociations {
  private readonly perUser = new Map<string, number>();
  private readonly live = new Set<Association>();
  /** rotor_udp_datagrams_dropped_total's series, made once (not per datagram). */
  private readonly drops: Partial<Record<DropReason, { inc(): void }>> = {};

  constructor(
    private readonly router: Router,
    private settings: UdpSettings,
    private readonly logger?: Logger,
    /** rotor_udp_datagrams_dropped_total, and rotor_proxy_bytes_total through each association's metered stream */
    readonly metrics?: Metrics,
  ) {
    if (metrics) for (const reason of DROP_REASONS) this.drops[reason] = metrics.udpDropped.labels({ reason });
  }

  dropped(reason: DropReason): void {
    this.drops[reason]?.inc();
  }

  setSettings(settings: UdpSettings): void {
    this.settings = settings;
  }

  /** Associations open now. */
  get size(): number {
    return this.live.size;
  }

  /** Serves a UDP ASSOCIATE whose client is authorized for `route`; answers the request itself. */
  async serve(control: Socket, request: ConnectRequest<unknown>, route: Route, conn: ConnectionContext): Promise<void> {
    const user = route.user.name;
    if (request.addressType === 3) {
      writeReply(control, REPLY.addressTypeNotSupported);
      conn.end({ result: 'bad_request', reason: 'UDP ASSOCIATE names its source by a domain name' });
      return;
    }
    const held = this.perUser.get(user) ?? 0;
    if (held >= this.settings.maxAssociationsPerUser) {
      writeReply(control, REPLY.notAllowed);
      conn.end({ result: 'limited', reason: `too many UDP associations (at most ${this.settings.maxAssociationsPerUser})` });
      return;
    }
    this.perUser.set(user, held + 1);
    const meters = this.router.meters;
    meters.connectionOpened(user);
    const abort = new DialCancel();
    const onGone = (): void => abort.abort();
    // The listener is half-open: a client that leaves during the dial sends a FIN ('end'), and only a socket
    // that reads sees it. Nothing the client sends on the control connection means anything: read and drop it.
    control.on('close', onGone);
    control.on('end', onGone);
    control.on('error', noop);
    control.resume();
    let dialed: Dialed;
    try {
      dialed = await this.router.dial(route, { host: request.host, port: request.port }, abort, 'udp', conn);
    } catch (err) {
      control.off('close', onGone);
      control.off('end', onGone);
      this.released(user);
      meters.connectionClosed(user);
      if (err instanceof GatewayError && err.code === 'DIAL_ABORTED') {
        control.destroy();
        conn.end({ result: 'client_abort', reason: err.message });
        return;
      }
      // In mode 'udp' a refusal that is "the target's" can only mean the upstream carries no UDP.
      if (refusedForUdp(abort) || (err instanceof GatewayError && err.upstreamReason === 'target_refused')) {
        writeReply(control, REPLY.commandNotSupported);
        conn.end({ result: 'upstream_error', reason: `UDP ASSOCIATE: ${UDP_UNSUPPORTED}` });
        return;
      }
      const reply = err instanceof GatewayError ? err.socksReply : REPLY.generalFailure;
      writeReply(control, reply);
      conn.end({
        result: err instanceof GatewayError ? err.connectionResult : 'upstream_error',
        reason: err instanceof Error ? err.message : 'internal error',
      });
      if (!(err instanceof GatewayError)) this.logger?.error({ conn: conn.id, user, err }, 'udp associate failed unexpectedly');
      return;
    }
    control.off('close', onGone);
    control.off('end', onGone);
    if (control.destroyed || abort.aborted) {
      control.destroy();
      dialed.socket.destroy();
      dialed.release();
      this.released(user);
      meters.connectionClosed(user);
      conn.end({ result: 'client_abort', reason: 'the client went away' });
      return;
    }
    const relay = relayOf(dialed.socket);
    if (!relay) throw new InternalError('udp dial without a relay address');
    const a = new Association(this, control, dialed, relay, route, conn, request);
    this.live.add(a);
    a.start();
  }

  /** Called once per association (or failed serve) when it ends. */
  released(user: string): void {
    const n = (this.perUser.get(user) ?? 1) - 1;
    if (n <= 0) this.perUser.delete(user);
    else this.perUser.set(user, n);
  }

  ended(a: Association): void {
    this.live.delete(a);
  }

  get config(): UdpSettings {
    return this.settings;
  }

  get routerOf(): Router {
    return this.router;
  }

  /** Ends every association (shutdown). */
  closeAll(): void {
    for (const a of [...this.live]) a.end('shutdown', 'shutting down');
  }
}

/** One association: the client's UDP socket, the upstream's, the two TCP control connections. */
class Association {
  private readonly client: UdpSocket;
  private readonly upstream: UdpSocket;
  /** The client's UDP address, fixed by the request (when it named both) or its first datagram; replies go only there. */
  private clientAddr: { address: string; port: number } | undefined;
  /** The one source address taken: the request's DST.ADDR, or the control connection's when it is zero. */
  private readonly fromAddress: string;
  /** The one source port taken: the request's DST.PORT, or the first datagram's when it is zero (0 until then). */
  private fromPort: number;
  /** Payload bytes both ways (tunnel-stream.ts: the user's meter, rotor_proxy_bytes_total, the record's counters). */
  private readonly stream: MeteredStream;
  private pending = 0;
  private over = false;
  private idle: NodeJS.Timeout | undefined;
  private lastActivity = Date.now();
  private dropped = 0;
  /** The user's rate (undefined: none); over it datagrams wait in `queue`. */
  private readonly limiter: RelayLimiter | undefined;
  /** Datagrams over the rate, in arrival order: the whole datagram, its header's length, its way. */
  private readonly queue: Array<{ msg: Buffer; header: number; up: boolean }> = [];
  private queuedBytes = 0;
  private waiting = false;
  /** Held by the user's limiter while the association runs: disabling or deleting the user ends it, as it ends TCP relays. */
  private readonly stopper = { stop: (): void => this.end('ok', 'stopped') };
  /** The stopper's place in the limiter's running relays while the association runs. */
  private attached: RelayAttachment | undefined = undefined;

  constructor(
    private readonly owner: UdpAssociations,
    private readonly control: Socket,
    private readonly dialed: Dialed,
    private readonly relay: { host: string; port: number },
    private readonly route: Route,
    private readonly conn: ConnectionContext,
    request: ConnectRequest<unknown>,
  ) {
    const local = control.localAddress ?? '127.0.0.1';
    this.client = createSocket({ type: isIPv6(local) && !local.startsWith('::ffff:') ? 'udp6' : 'udp4' });
    this.upstream = createSocket({ type: isIPv6(relay.host) ? 'udp6' : 'udp4' });
    const named = canonical(request.host, request.addressType);
    this.fromAddress = named ?? bare(control.remoteAddress ?? '');
    this.fromPort = request.port;
    if (this.fromPort !== 0) this.clientAddr = { address: this.fromAddress, port: this.fromPort };
    const user = route.user.name;
    const meters = owner.routerOf.meters;
    this.limiter = meters.limiter?.(user);
    this.stream = new MeteredStream(meters.meter(user), this.limiter, owner.metrics ? { metrics: owner.metrics, user } : undefined);
  }

  start(): void {
    const { control, dialed, conn } = this;
    // The association's exit is not named by its reply (BND.ADDR is the UDP relay, not where datagrams leave).
    recordNode(conn, dialed.node, null);
    recordCarrying(conn, this.stream, () => this.end('ok', 'closed by the admin'));
    if (this.limiter) this.attached = this.limiter.attach(this.stopper);
    control.on('close', () => this.end('ok', null));
    control.on('end', () => this.end('ok', null));
    dialed.socket.on('error', noop);
    dialed.socket.on('close', () => this.end('upstream_error', 'the upstream ended the association'));
    dialed.socket.resume();
    control.resume();
    this.client.on('error', () => this.end('upstream_error', 'client UDP socket failed'));
    this.upstream.on('error', () => this.end('upstream_error', 'upstream UDP socket failed'));
    this.client.on('message', (msg, from) => this.fromClient(msg, from));
    this.upstream.on('message', (msg) => this.fromUpstream(msg));
    const local = bare(control.localAddress ?? '127.0.0.1');
    let ready = 0;
    const go = (): void => {
      if (++ready < 2 || this.over) return;
      const a = this.client.address();
      writeReply(control, REPLY.succeeded, { host: bare(a.address), port: a.port });
      const idleMs = this.owner.config.idleTimeoutMs;
      if (idleMs > 0) this.idle = setInterval(() => this.checkIdle(idleMs), Math.min(idleMs, 5000));
      this.idle?.unref();
    };
    this.client.bind(0, local, go);
    // Connected: the kernel only passes datagrams from the upstream's relay.
    this.upstream.connect(this.relay.port, this.relay.host, go);
  }

  private checkIdle(idleMs: number): void {
    this.stream.flush();
    if (Date.now() - this.lastActivity >= idleMs) this.end('ok', 'idle');
  }

  private fromClient(msg: Buffer, from: RemoteInfo): void {
    if (this.over) return;
    if ((this.fromPort !== 0 && from.port !== this.fromPort) || bare(from.address) !== this.fromAddress) return this.drop('foreign');
    if (this.fromPort === 0) {
      this.fromPort = from.port;
      this.clientAddr = { address: this.fromAddress, port: from.port };
    }
    const h = parseUdpHeader(msg);
    if ('error' in h) return this.drop('malformed');
    if (h.frag !== 0) return this.drop('fragment');
    try {
      checkTarget({ host: h.host, port: h.port });
    } catch {
      return this.drop('malformed');
    }
    if (this.owner.routerOf.destinationRefusal(this.route, { host: h.host, port: h.port }) !== undefined) return this.drop('not_allowed');
    this.pass(msg, h.length, true);
  }

  private fromUpstream(msg: Buffer): void {
    if (this.over || !this.clientAddr) return;
    const h = parseUdpHeader(msg);
    if ('error' in h) return this.drop('malformed');
    if (h.frag !== 0) return this.drop('fragment');
    this.pass(msg, h.length, false);
  }

  /** Sends now, or queues behind the rate (bounded), or drops. */
  private pass(msg: Buffer, header: number, up: boolean): void {
    if (this.stream.exhausted) return this.end('limited', 'traffic limit reached');
    const limiter = this.limiter;
    if (limiter !== undefined && (this.queue.length > 0 || !limiter.take(0))) return this.enqueue(limiter, msg, header, up);
    this.send(msg, header, up);
  }

  private send(msg: Buffer, header: number, up: boolean): void {
    if (this.pending >= this.owner.config.maxPendingDatagrams) return this.drop('queue_full');
    const bytes = msg.length - header;
    this.limiter?.take(bytes);
    this.lastActivity = Date.now();
    this.pending++;
    if (up) {
      this.stream.sent(bytes);
      this.upstream.send(msg, this.sent);
    } else {
      this.stream.received(bytes);
      const to = this.clientAddr!;
      this.client.send(msg, to.port, to.address, this.sent);
    }
  }

  private readonly sent = (): void => {
    this.pending--;
  };

  /** Queued: at most maxPendingDatagrams (with those in flight) and one second of the rate (at least one datagram). */
  private enqueue(limiter: RelayLimiter, msg: Buffer, header: number, up: boolean): void {
    const second = Math.max(limiter.rateBytesPerSec ?? 0, msg.length);
    if (this.queue.length + this.pending >= this.owner.config.maxPendingDatagrams || this.queuedBytes + msg.length > second)
      return this.drop('queue_full');
    this.queue.push({ msg, header, up });
    this.queuedBytes += msg.length;
    if (!this.waiting) {
      this.waiting = true;
      limiter.wait(this.wake);
    }
  }

  /** The bucket refilled: queued datagrams go while it lasts. */
  private readonly wake = (): void => {
    this.waiting = false;
    const limiter = this.limiter;
    if (this.over || limiter === undefined) return;
    while (this.queue.length > 0 && limiter.take(0)) {
      const next = this.queue.shift()!;
      this.queuedBytes -= next.msg.length;
      if (this.stream.exhausted) return this.end('limited', 'traffic limit reached');
      this.send(next.msg, next.header, next.up);
      if (this.over) return;
    }
    if (this.queue.length > 0) {
      this.waiting = true;
      limiter.wait(this.wake);
    }
  };

  private drop(reason: DropReason): void {
    this.dropped++;
    this.owner.dropped(reason);
  }

  end(result: 'ok' | 'limited' | 'upstream_error' | 'shutdown', reason: string | null): void {
    if (this.over) return;
    this.over = true;
    this.attached?.detach();
    clearInterval(this.idle);
    this.queue.length = 0;
    this.queuedBytes = 0;
    for (const s of [this.client, this.upstream]) {
      try {
        s.close();
      } catch {
        // not bound yet or already closed
      }
    }
    this.control.destroy();
    this.dialed.socket.destroy();
    this.dialed.release();
    const user = this.route.user.name;
    this.owner.released(user);
    this.owner.routerOf.meters.connectionClosed(user);
    this.owner.ended(this);
    this.stream.flush();
    this.conn.end({ result, reason: this.dropped > 0 ? `${reason ?? 'closed'}; ${this.dropped} datagrams dropped` : reason });
  }
}

/**
 * The request's DST.ADDR in the form the kernel gives a datagram's source (IPv6 shortened, an IPv4-mapped one as
 * IPv4), or undefined for an all-zero address (the client does not know it yet).
 */
function canonical(host: string, addressType: 1 | 3 | 4): string | undefined {
  const address = bare(new SocketAddress({ address: host, family: addressType === 4 ? 'ipv6' : 'ipv4' }).address);
  return address === '0.0.0.0' || address === '::' ? undefined : address;
}

function bare(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

function noop(): void {}
