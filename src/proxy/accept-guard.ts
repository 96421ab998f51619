// Running out of file descriptors, handled as what it is: the process's own exhaustion, never an upstream's
// fault (src/errors/failed-accept.ts carries the reports; a dial that meets EMFILE/ENFILE fails with
// DescriptorsExhaustedError, which no node is blamed for).
//
// Node cannot stop polling a listening socket without closing it (the port would be lost), and libuv already
// accepts-and-closes a connection it has no descriptor for (a spare descriptor it keeps for that: clients are
// refused instead of rotting in the backlog, and the loop does not spin) — silently. So an episode is:
// - begun by the first report (an upstream dial or a server's accept that failed, or the sampler finding no
//   descriptor to open): one warning line, rotor_descriptors_exhausted 1, and the reserve (a few descriptors
//   on /dev/null held while all is well) closed, so the admin API, /metrics and the probe still find one;
// - while it lasts, every watched proxy listener (the shared HTTP and SOCKS5 ports, HTTPS, users' own ports)
//   drops a new client at accept (maxConnections: no socket object, nothing read, no TLS, no dial; counted
//   where="accept"); tunnels already open keep running;
// - ended when a probe (every probeMs) finds the reserve plus a headroom free: the reserve is taken back,
//   the listeners accept again, one info line.
// Outside an episode a sampler (every sampleMs) keeps rotor_descriptors_open/limit current and notices a
// table already full (libuv's silent refusals tell nobody). Descriptors are the process's, so the guard is
// one per process (`descriptorGuard`); each running daemon attaches its metrics and logger.
import { closeSync, openSync } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import type { Server } from 'node:net';
import { isDescriptorExhaustion, onDescriptorExhaustion, type ExhaustionSite } from '../errors/failed-accept.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';

/** The process's descriptors: open now, the soft limit, and how many more can be opened (below the limit). */
export interface DescriptorCount {
  open: number;
  limit: number;
  free: number;
}

/**
 * Reads the process's descriptor count; `free` is exact when below `enough`, else at least `enough`. Rejects
 * with EMFILE/ENFILE when not even one descriptor can be opened.
 */
export type DescriptorProbe = (enough: number) => Promise<DescriptorCount>;

export interface GuardSink {
  metrics?: Metrics | undefined;
  logger?: Logger | undefined;
}

export interface GuardOptions {
  probe?: DescriptorProbe;
  /** Descriptors held on /dev/null while all is well, closed when an episode begins. */
  reserve?: number;
  /** Between samples outside an episode. */
  sampleMs?: number;
  /** Between probes during an episode. */
  probeMs?: number;
  /** Free descriptors (beyond the reserve) an episode ends with: at least this, and at least 1 % of the limit. */
  headroom?: number;
}

interface Episode {
  startedAt: number;
  where: ExhaustionSite;
  refused: number;
  dials: number;
}

// Node drops a new connection (closing its handle before any Socket exists, 'drop' emitted) when
// `maxConnections` is truthy and `_connections >= maxConnections`; -1 makes that true for every connection
// (0 would mean "no limit"). test/proxy/accept-guard.test.ts checks this against the running Node.
const DROP_ALL = -1;

/**
 * The process's descriptors from /proc (Linux). The limit file takes a descriptor to read: failing with EMFILE
 * is the sign that none is left. The count is the fd directory's size (Linux 6.2 and later: no listing, no
 * descriptor); limit − count is then a floor of what can be opened. Below `enough` (or on an older kernel) the
 * directory is listed: the kernel hands out the lowest free number and refuses one at or above the soft limit,
 * so what can be opened is the limit minus the descriptors numbered below it (a limit lowered while running
 * leaves some above it).
 */
export async function procDescriptors(enough: number): Promise<DescriptorCount> {
  const limit = softNofile(await readFile('/proc/self/limits', 'utf8'));
  const open = (await stat('/proc/self/fd')).size;
  if (open > 0 && limit - open >= enough) return { open, limit, free: limit - open };
  const names = await readdir('/proc/self/fd');
  let below = 0;
  for (const n of names) if (Number(n) < limit) below++;
  // The listing names the directory's own descriptor, closed again by now.
  return { open: names.length - 1, limit, free: limit - below + 1 };
}

/** The soft "Max open files" of a /proc/<pid>/limits text; Infinity when unlimited or unreadable. */
export function softNofile(limits: string): number {
  const m = /^Max open files\s+(\d+)/m.exec(limits);
  return m ? Number(m[1]) : Infinity;
}

export class DescriptorGuard {
  private readonly probe: DescriptorProbe;
  private readonly reserveSize: number;
  private readonly sampleMs: number;
  private readonly probeMs: number;
  private readonly headroom: number;
  private readonly sinks = new Set<GuardSink>();
  private readonly servers = new Map<Server, number | undefined>();
  private reserve: number[] = [];
  private episode: Episode | undefined;
  private timer: NodeJS.Timeout | undefined;
  private probing = false;
  /** The soft limit last read. */
  private limit = Infinity;
  /** Off once the probe fails for another reason than exhaustion (no /proc): episodes then end by the clock. */
  private measurable = true;
  private unsubscribe: (() => void) | undefined;

  constructor(options: GuardOptions = {}) {
    this.probe = options.probe ?? procDescriptors;
    this.reserveSize = options.reserve ?? 8;
    this.sampleMs = options.sampleMs ?? 2000;
    this.probeMs = options.probeMs ?? 250;
    this.headroom = options.headroom ?? 8;
  }

  /** Whether descriptors are exhausted now (the watched listeners drop new clients). */
  get exhausted(): boolean {
    return this.episode !== undefined;
  }

  /**
   * A running daemon's metrics and logger; the first attach starts the sampler and takes the reserve, the
   * last detach stops both. Returns the detach.
   */
  attach(sink: GuardSink): () => void {
    this.sinks.add(sink);
    if (this.sinks.size === 1) {
      this.unsubscribe = onDescriptorExhaustion((where, err) => this.report(where, err));
      this.takeReserve();
      this.schedule(0);
    }
    sink.metrics?.descriptorsExhausted.set(this.episode ? 1 : 0);
    return () => {
      if (!this.sinks.delete(sink) || this.sinks.size > 0) return;
      this.unsubscribe?.();
      clearTimeout(this.timer);
      this.timer = undefined;
      if (this.episode) this.reopen();
      this.episode = undefined;
      this.releaseReserve();
    };
  }

  /** A proxy listener's server: drops new clients during an episode, counted; forgotten once it closes. */
  watch(server: Server): void {
    if (this.servers.has(server)) return;
    this.servers.set(server, server.maxConnections);
    if (this.episode) server.maxConnections = DROP_ALL;
    server.on('drop', () => this.dropped());
    server.once('close', () => this.servers.delete(server));
  }

  /** One operation that failed for want of a descriptor (also what failed-accept.ts reports lead to). */
  report(where: ExhaustionSite, err?: NodeJS.ErrnoException): void {
    this.count(where);
    if (this.episode) {
      if (where === 'dial') this.episode.dials++;
      return;
    }
    this.begin(where, err);
  }

  private dropped(): void {
    // Only this guard sets maxConnections on watched servers: a drop outside an episode is an operator's own
    // maxConnections, not exhaustion.
    if (!this.episode) return;
    this.episode.refused++;
    this.count('accept');
  }

  private count(where: ExhaustionSite): void {
    for (const s of this.sinks) s.metrics?.descriptorExhaustion.inc({ where });
  }

  private begin(where: ExhaustionSite, err: NodeJS.ErrnoException | undefined): void {
    this.episode = { startedAt: Date.now(), where, refused: 0, dials: where === 'dial' ? 1 : 0 };
    this.releaseReserve();
    for (const [server] of this.servers) server.maxConnections = DROP_ALL;
    for (const s of this.sinks) {
      s.metrics?.descriptorsExhausted.set(1);
      s.logger?.warn(
        { where, code: err?.code ?? 'EMFILE' },
        'descriptors exhausted: the proxy listeners refuse new clients until some are free (raise LimitNOFILE / ulimit -n: README "Descriptors")',
      );
    }
    this.schedule(this.probeMs);
  }

  private end(): void {
    const e = this.episode;
    if (!e || !this.takeReserve()) return;
    this.episode = undefined;
    this.reopen();
    for (const s of this.sinks) {
      s.metrics?.descriptorsExhausted.set(0);
      s.logger?.info(
        { ms: Date.now() - e.startedAt, refused: e.refused, dials: e.dials },
        'descriptors available again: accepting resumed',
      );
    }
  }

  private reopen(): void {
    for (const [server, max] of this.servers) server.maxConnections = max as number;
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    if (this.sinks.size === 0) return;
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      if (this.measurable) await this.measure();
      else if (this.episode && Date.now() - this.episode.startedAt >= this.sampleMs) this.end();
    } finally {
      this.probing = false;
      this.schedule(this.episode ? this.probeMs : this.sampleMs);
    }
  }

  /** Free descriptors that end an episode: the reserve and a headroom of at least 1 % of the limit. */
  private needed(limit: number): number {
    return this.reserveSize + Math.max(this.headroom, Number.isFinite(limit) ? Math.ceil(limit / 100) : 0);
  }

  private async measure(): Promise<void> {
    let c: DescriptorCount;
    try {
      c = await this.probe(this.episode ? this.needed(this.limit) : 1);
    } catch (err) {
      if (isDescriptorExhaustion(err)) {
        // libuv refuses clients it cannot accept without telling anyone: a full table is the sign.
        if (!this.episode) this.report('accept', err as NodeJS.ErrnoException);
      } else this.measurable = false;
      return;
    }
    this.limit = c.limit;
    for (const s of this.sinks) {
      s.metrics?.descriptorsOpen.set(c.open);
      if (Number.isFinite(c.limit)) s.metrics?.descriptorsLimit.set(c.limit);
    }
    if (this.episode && c.free >= this.needed(c.limit)) this.end();
  }

  /** Opens the reserve; false (nothing kept) when the descriptors are not there. */
  private takeReserve(): boolean {
    try {
      while (this.reserve.length < this.reserveSize) this.reserve.push(openSync('/dev/null', 'r'));
      return true;
    } catch {
      this.releaseReserve();
      return false;
    }
  }

  private releaseReserve(): void {
    for (const fd of this.reserve.splice(0)) closeSync(fd);
  }
}

/** The process's one guard (descriptors are per process). */
export const descriptorGuard = new DescriptorGuard();
