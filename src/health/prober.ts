// Background health probes for every pool (pool.healthCheck). Two jobs, on one unref'd timer:
// - a node that went cooling is probed once its cool-down ran out, and returns to service only when a probe
//   passes (the pool's probation); a failed probe cools it again, so a dead node costs one probe per
//   coolDownMs and never a client's connection;
// - idle ready nodes are probed at a bounded rate, one per pool per intervalMs, the one idle longest first,
//   so a node that died while unused is found before a client picks it.
// Probes run off the data path; a pool never has more than `perPool` running at once.
// The timer is armed for the next moment there is something to do (a cool-down's end, the next idle probe),
// not every tickMs: an idle daemon with healthy nodes wakes for it once per lookMs, not four times a second.
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
  /**
   * When the first node waiting for a probe becomes due (its cool-down's end; now or earlier when it is due
   * already), undefined when none waits. A pool without it is looked at every tickMs.
   */
  nextProbeAt?(): number | undefined;
}

/** The prober's one timer (tests pass their own to see when it is armed). */
export interface ProberTimer {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const nodeTimer: ProberTimer = {
  set: (fn, ms) => setTimeout(fn, ms).unref(),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface ProberOptions {
  pools: () => Iterable<ProbeablePool>;
  probe: (node: UpstreamNode) => Promise<ProbeResult>;
  /** One idle ready node per pool this often; 0 = no idle probes. */
  idleIntervalMs: number;
  /** The shortest time between two passes over the pools; default 250 ms. */
  tickMs?: number;
  /**
   * The longest time between two passes: a node that goes cooling is not due before this long after it
   * (the wiring passes the shortest cool-down or ejection), so a pass this often sees it before its cool-down
   * ends and arms the timer for that end. Default tickMs (every tick, as a pool that cannot say when).
   */
  lookMs?: number;
  timer?: ProberTimer;
  /** Probes running at once per pool; default 2. */
  perPool?: number;
  now?: () => number;
  metrics?: Metrics;
  logger?: Logger;
}

export class Prober {
  private timer: unknown;
  /** When the armed timer fires (now()'s clock); undefined when none is armed. */
  private armedAt: number | undefined;
  private lastPass = -Infinity;
  private readonly timers: ProberTimer;
  private readonly tickMs: number;
  private readonly lookMs: number;
  private readonly running = new Map<string, number>();
  private readonly lastIdle = new Map<string, number>();
  private readonly now: () => number;
  private readonly perPool: number;
  private stopped = false;
  private started = false;

  constructor(private readonly o: ProberOptions) {
    this.now = o.now ?? Date.now;
    this.perPool = Math.max(1, o.perPool ?? 2);
    this.timers = o.timer ?? nodeTimer;
    this.tickMs = Math.max(1, o.tickMs ?? 250);
    this.lookMs = Math.max(this.tickMs, o.lookMs ?? this.tickMs);
  }

  start(): void {
    if (this.stopped || this.started) return;
    this.started = true;
    this.plan();
  }

  stop(): void {
    this.stopped = true;
    this.disarm();
  }

  /** Whether the timer is armed, and for when (now()'s clock). */
  get nextPassAt(): number | undefined {
    return this.armedAt;
  }

  /** One pass over the pools (the timer's work; tests may call it), then the timer armed for the next. */
  tick(): void {
    if (this.stopped) return;
    const now = this.now();
    this.lastPass = now;
    // Out of descriptors, a probe would fail for the process's want, not the node's: none starts.
    if (!descriptorGuard.exhausted) {
      for (const pool of this.o.pools()) {
        for (const node of pool.probeDue()) {
          if (!this.run(pool, node)) break;
        }
        if (this.o.idleIntervalMs > 0 && now - (this.lastIdle.get(pool.id) ?? 0) >= this.o.idleIntervalMs) {
          const node = pool.idleCandidate();
          // A pool with no idle node now is looked at again an interval later, not every pass.
          if (node === undefined || this.run(pool, node)) this.lastIdle.set(pool.id, now);
        }
      }
    }
    this.plan();
  }

  /**
   * Arms the timer for the next moment there is work: the earliest due probe of a pool with room for one,
   * the next idle probe, at the latest lookMs from now; never sooner than tickMs after the last pass.
   */
  private plan(): void {
    if (this.stopped || !this.started) return;
    const now = this.now();
    let at = now + this.lookMs;
    if (descriptorGuard.exhausted) at = now;
    else {
      for (const pool of this.o.pools()) {
        if (pool.nextProbeAt === undefined) {
          at = now;
          break;
        }
        if ((this.running.get(pool.id) ?? 0) < this.perPool) {
          const due = pool.nextProbeAt();
          if (due !== undefined && due < at) at = due;
        }
        if (this.o.idleIntervalMs > 0) at = Math.min(at, (this.lastIdle.get(pool.id) ?? 0) + this.o.idleIntervalMs);
      }
    }
    // Never longer than lookMs: a clock set back (or a test's clock moved) does not hold the probes up.
    const delay = Math.min(Math.max(at, this.lastPass + this.tickMs, now) - now, this.lookMs);
    if (this.armedAt !== undefined && this.armedAt <= now + delay) return;
    this.disarm();
    this.armedAt = now + delay;
    this.timer = this.timers.set(() => {
      this.armedAt = undefined;
      this.timer = undefined;
      this.tick();
    }, delay);
  }

  private disarm(): void {
    if (this.armedAt === undefined) return;
    this.timers.clear(this.timer);
    this.timer = undefined;
    this.armedAt = undefined;
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
        if (!r.ok && descriptorGuard.exhausted) {
          pool.probeAbandoned(node);
          this.plan();
          return;
        }
        this.o.metrics?.upstreamProbes.inc({ result: r.ok ? 'pass' : 'fail' });
        const record: ProbeRecord = { at: this.now(), ok: r.ok, latencyMs: r.latencyMs, ...(r.ok ? {} : { reason: r.reason }) };
        if (!r.ok) this.o.logger?.debug({ pool: pool.id, node: node.id, reason: r.reason, message: r.message }, 'node failed its probe');
        pool.recordProbe(node, record);
        // A failed probe cooled the node again; a freed slot may let a waiting node start.
        this.plan();
      });
    return true;
  }
}
