// Moves bytes both ways between a client and its upstream tunnel. Per chunk the data path does a write,
// two number adds (the connection's own counters and the user's meter) and a flag check; the handlers are
// created once per connection. The user's meter decides when to stop: once `exhausted` is set (by this or
// another connection of the user) both sides are destroyed on the next chunk. Idle detection and the
// rotor_proxy_bytes_total updates run on one coarse timer shared by all relays with the same tick (not a
// timer per connection: an idle tunnel should cost its sockets and little else), so neither happens per chunk.
import type { Socket } from 'node:net';
import type { Counter } from 'prom-client';
import type { Metrics } from '../telemetry/metrics.ts';
import type { RelayLimiter, UserMeter } from './types.ts';

export type RelayEnd = 'closed' | 'idle' | 'limit' | 'error' | 'stopped';

export interface RelayStats {
  /** client → upstream */
  up: number;
  /** upstream → client */
  down: number;
  end: RelayEnd;
}

export interface RelayOptions {
  meter: UserMeter;
  /** No byte either way for this long closes both sides. */
  idleTimeoutMs: number;
  /** Client bytes already read (sent behind a CONNECT or SOCKS5 request): go upstream first. */
  clientHead?: Buffer | null;
  /** Upstream bytes already read (behind the upstream's tunnel answer): go to the client first. */
  upstreamHead?: Buffer | null;
  /** rotor_proxy_bytes_total{user,direction}, updated on the timer and at the end. */
  bytes?: { metrics: Metrics; user: string };
  /**
   * The user's rate and relay registry (src/users/limiter.ts): over the rate, the side just read is paused
   * until the limiter wakes it (backpressure; the chunk read is forwarded). Absent: no rate.
   */
  limiter?: RelayLimiter;
  /** How often the byte counter is updated. Default 5000 ms. */
  flushIntervalMs?: number;
  onEnd?: (stats: RelayStats) => void;
}

export interface RelayHandle {
  readonly stats: RelayStats;
  /** Ends the relay now (shutdown): both sides destroyed. */
  stop(): void;
}

type CounterChild = ReturnType<Counter<'user' | 'direction'>['labels']>;

class Relay implements RelayHandle {
  readonly stats: RelayStats = { up: 0, down: 0, end: 'closed' };
  private done = false;
  // Starts true: the shared tick's phase is arbitrary, so the first (partial) tick must not count as idle.
  private active = true;
  private idleFor = 0;
  private flushedUp = 0;
  private flushedDown = 0;
  readonly tickMs: number;
  private readonly limiter: RelayLimiter | undefined;
  /** Paused by the limiter (not by the other side's backpressure). */
  private clientHeld = false;
  private upstreamHeld = false;
  private readonly upCounter: CounterChild | undefined;
  private readonly downCounter: CounterChild | undefined;

  constructor(
    private readonly client: Socket,
    private readonly upstream: Socket,
    private readonly options: RelayOptions,
  ) {
    if (options.bytes) {
      this.upCounter = options.bytes.metrics.bytesTotal.labels({ user: options.bytes.user, direction: 'up' });
      this.downCounter = options.bytes.metrics.bytesTotal.labels({ user: options.bytes.user, direction: 'down' });
    }
    this.tickMs = Math.max(10, Math.min(options.idleTimeoutMs, options.flushIntervalMs ?? 5000));
    this.limiter = options.limiter;

    client.on('data', this.onClientData);
    upstream.on('data', this.onUpstreamData);
    client.on('drain', this.onClientDrain);
    upstream.on('drain', this.onUpstreamDrain);
    client.on('end', this.onClientEnd);
    upstream.on('end', this.onUpstreamEnd);
    client.on('close', this.onClose);
    upstream.on('close', this.onClose);
    client.on('error', this.onError);
    upstream.on('error', this.onError);

    const { clientHead, upstreamHead } = options;
    if (clientHead && clientHead.length > 0) this.onClientData(clientHead);
    if (upstreamHead && upstreamHead.length > 0 && !this.done) this.onUpstreamData(upstreamHead);
    if (this.done) return;
    if (client.destroyed || upstream.destroyed) {
      this.finish('closed');
      return;
    }
    // A head over the user's rate leaves its side paused until the limiter wakes it.
    if (!this.clientHeld) client.resume();
    if (!this.upstreamHeld) upstream.resume();
    joinTicker(this);
  }

  private readonly onClientData = (chunk: Buffer): void => {
    const n = chunk.length;
    this.stats.up += n;
    this.active = true;
    const meter = this.options.meter;
    meter.add(n, 0);
    if (meter.exhausted) {
      this.finish('limit');
      return;
    }
    if (!this.upstream.write(chunk)) this.client.pause();
    if (this.limiter !== undefined && !this.limiter.take(n)) {
      this.clientHeld = true;
      this.client.pause();
      this.limiter.wait(this.onClientWake);
    }
  };

  private readonly onUpstreamData = (chunk: Buffer): void => {
    const n = chunk.length;
    this.stats.down += n;
    this.active = true;
    const meter = this.options.meter;
    meter.add(0, n);
    if (meter.exhausted) {
      this.finish('limit');
      return;
    }
    if (!this.client.write(chunk)) this.upstream.pause();
    if (this.limiter !== undefined && !this.limiter.take(n)) {
      this.upstreamHeld = true;
      this.upstream.pause();
      this.limiter.wait(this.onUpstreamWake);
    }
  };

  // A side paused by the limiter stays paused through the other side's 'drain', and the reverse.
  private readonly onClientDrain = (): void => {
    if (!this.upstreamHeld) this.upstream.resume();
  };

  private readonly onUpstreamDrain = (): void => {
    if (!this.clientHeld) this.client.resume();
  };

  private readonly onClientWake = (): void => {
    this.clientHeld = false;
    if (!this.done && !this.upstream.writableNeedDrain) this.client.resume();
  };

  private readonly onUpstreamWake = (): void => {
    this.upstreamHeld = false;
    if (!this.done && !this.client.writableNeedDrain) this.upstream.resume();
  };

  // Half-close is passed on: the other side may still be sending.
  private readonly onClientEnd = (): void => {
    this.upstream.end();
  };

  private readonly onUpstreamEnd = (): void => {
    this.client.end();
  };

  private readonly onClose = (): void => {
    this.finish('closed');
  };

  private readonly onError = (): void => {
    this.finish('error');
  };

  /** Called by the shared ticker every tickMs. */
  tick(): void {
    this.flush();
    if (this.active) {
      this.active = false;
      this.idleFor = 0;
      return;
    }
    this.idleFor += this.tickMs;
    if (this.idleFor >= this.options.idleTimeoutMs) this.finish('idle');
  }

  private flush(): void {
    const { up, down } = this.stats;
    if (this.upCounter && up > this.flushedUp) this.upCounter.inc(up - this.flushedUp);
    if (this.downCounter && down > this.flushedDown) this.downCounter.inc(down - this.flushedDown);
    this.flushedUp = up;
    this.flushedDown = down;
  }

  stop(): void {
    this.finish('stopped');
  }

  private finish(end: RelayEnd): void {
    if (this.done) return;
    this.done = true;
    this.stats.end = end;
    leaveTicker(this);
    const { client, upstream } = this;
    client.off('data', this.onClientData);
    upstream.off('data', this.onUpstreamData);
    client.off('drain', this.onClientDrain);
    upstream.off('drain', this.onUpstreamDrain);
    client.off('end', this.onClientEnd);
    upstream.off('end', this.onUpstreamEnd);
    client.off('close', this.onClose);
    upstream.off('close', this.onClose);
    client.off('error', this.onError);
    upstream.off('error', this.onError);
    // Late errors (a reset racing the destroy) must not crash the process.
    client.on('error', noop);
    upstream.on('error', noop);
    if (end === 'closed') {
      // One side is gone; the other ends once it has flushed what it was given (destroySoon), and a peer
      // that stops reading is cut off after the idle timeout.
      client.destroySoon();
      upstream.destroySoon();
      const cutoff = setTimeout(() => {
        client.destroy();
        upstream.destroy();
      }, this.options.idleTimeoutMs).unref();
      let open = (client.closed ? 0 : 1) + (upstream.closed ? 0 : 1);
      const closed = (): void => {
        if (--open <= 0) clearTimeout(cutoff);
      };
      if (open === 0) clearTimeout(cutoff);
      if (!client.closed) client.once('close', closed);
      if (!upstream.closed) upstream.once('close', closed);
    } else {
      client.destroy();
      upstream.destroy();
    }
    this.flush();
    this.options.onEnd?.(this.stats);
  }
}

function noop(): void {}

/** Relays by tick length, each group on one unref'd interval that stops when the group empties. */
const tickers = new Map<number, { relays: Set<Relay>; timer: NodeJS.Timeout }>();

function joinTicker(r: Relay): void {
  let group = tickers.get(r.tickMs);
  if (!group) {
    const relays = new Set<Relay>();
    const timer = setInterval(() => {
      // finish() inside tick() deletes from the set; a Set iterator tolerates that.
      for (const each of relays) each.tick();
    }, r.tickMs);
    timer.unref();
    group = { relays, timer };
    tickers.set(r.tickMs, group);
  }
  group.relays.add(r);
}

function leaveTicker(r: Relay): void {
  const group = tickers.get(r.tickMs);
  if (!group || !group.relays.delete(r) || group.relays.size > 0) return;
  clearInterval(group.timer);
  tickers.delete(r.tickMs);
}

/**
 * 'reset' when the upstream failed (an error, not a clean close) before sending the client one byte: the node
 * answered the tunnel and died, which the pool must hear about (Dialed.release). Else undefined.
 */
export function upstreamFailedEarly(stats: RelayStats, upstream: Socket): 'reset' | undefined {
  return stats.down === 0 && stats.end === 'error' && upstream.errored ? 'reset' : undefined;
}

/** Starts relaying; returns at once. Both sockets are owned by the relay from here on. */
export function relay(client: Socket, upstream: Socket, options: RelayOptions): RelayHandle {
  return new Relay(client, upstream, options);
}
