// Background health probes for every pool (pool.healthCheck). Two jobs, on one unref'd timer:
// - a node that went cooling is probed once its cool-down ran out, and returns to service only when a probe
//   passes (the pool's probation); a failed probe cools it again, so a dead node costs one probe per
//   coolDownMs and never a client's connection;
// - idle ready nodes are probed at a bounded rate, one per pool per intervalMs, the one idle longest first,
//   so a node that died while unused is found before a client picks it.
// Probes run off the data path; a pool never has more than `perPool` running at once.
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { ProbeRecord } from '../pool/pool.ts';
import type { UpstreamNode } from '../pool/types.ts';
import type { ProbeResult } from './probe.ts';
import { descriptorGuard } from '../proxy/accept-guard.ts';

/** What the prober needs of a pool (src/pool/pool.ts Pool). */
export interface ProbeablePool {
  readonly id: string;
  probeDue(): UpstreamNode[];
  idleCandidate(): UpstreamNode | undefined;
  probeStarted(node: UpstreamNode): void;
  recordProbe(node: UpstreamNode, record: ProbeRecord): void;
  /** A probe that gave no verdict: the node may be probed again, nothing recorded. */
  probeAbandoned(node: UpstreamNode): void;
}

export interface ProberOptions {
  pools: () => Iterable<ProbeablePool>;
  probe: (node: UpstreamNode) => Promise<ProbeResult>;
  /** One idle ready node per pool this often; 0 = no idle probes. */
  idleIntervalMs: number;
  /** How often due probes are looked for; default 250 ms. */
  tickMs?: number;
  /** Probes running at once per pool; default 2. */
  perPool?: number;
  now?: () => number;
  metrics?: Metrics;
  logger?: Logger;
}

export class Prober {
  private timer: NodeJS.Timeout | undefined;
  private readonly running = new Map<string, number>();
  private readonly lastIdle = new Map<string, number>();
  private readonly now: () => number;
  private readonly perPool: number;
  private stopped = false;

  constructor(private readonly o: ProberOptions) {
    this.now = o.now ?? Date.now;
    this.perPool = Math.max(1, o.perPool ?? 2);
  }

  start(): void {
    if (this.timer || this.stopped) return;
    this.timer = setInterval(() => this.tick(), this.o.tickMs ?? 250);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One pass over the pools (the timer's work; tests may call it). */
  tick(): void {
    // Out of descriptors, a probe would fail for the process's want, not the node's: none starts.
    if (this.stopped || descriptorGuard.exhausted) return;
    const now = this.now();
    for (const pool of this.o.pools()) {
      for (const node of pool.probeDue()) {
        if (!this.run(pool, node)) break;
      }
      if (this.o.idleIntervalMs > 0 && now - (this.lastIdle.get(pool.id) ?? 0) >= this.o.idleIntervalMs) {
        const node = pool.idleCandidate();
        if (node && this.run(pool, node)) this.lastIdle.set(pool.id, now);
      }
    }
  }

  /** Starts one probe unless the pool has its fill running; false when it has. */
  private run(pool: ProbeablePool, node: UpstreamNode): boolean {
    const busy = this.running.get(pool.id) ?? 0;
    if (busy >= this.perPool) return false;
    this.running.set(pool.id, busy + 1);
    pool.probeStarted(node);
    void this.o
      .probe(node)
      .catch((err: unknown): ProbeResult => ({
        ok: false,
        latencyMs: 0,
        reason: 'other',
        message: err instanceof Error ? err.message : String(err),
      }))
      .then((r) => {
        const left = (this.running.get(pool.id) ?? 1) - 1;
        if (left > 0) this.running.set(pool.id, left);
        else this.running.delete(pool.id);
        if (!r.ok && descriptorGuard.exhausted) return pool.probeAbandoned(node);
        this.o.metrics?.upstreamProbes.inc({ result: r.ok ? 'pass' : 'fail' });
        const record: ProbeRecord = { at: this.now(), ok: r.ok, latencyMs: r.latencyMs, ...(r.ok ? {} : { reason: r.reason }) };
        if (!r.ok) this.o.logger?.debug({ pool: pool.id, node: node.id, reason: r.reason, message: r.message }, 'node failed its probe');
        pool.recordProbe(node, record);
      });
    return true;
  }
}
