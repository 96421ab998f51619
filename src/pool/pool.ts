// A pool of upstream nodes for one (user, product, region), fed by a Drawer. Selection is staged (after gost's
// selector filters): ready nodes go through the strategy; when none is ready, the least recently failed
// cooling node is the last resort; only an empty pool waits, bounded, for a draw. Refill runs in the
// background below the low-water mark, so a connection never waits on the platform while a node is ready.
// Concurrent acquires share one in-flight draw; failed draws back off exponentially.
import { AccountRefusedError } from './account-refusal.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Drawer } from './drawer.ts';
import { setNodeOwner } from './node-owner.ts';
import { newOutlierState, OutlierDetector, type OutlierSettings, type OutlierState } from './outlier.ts';
import {
  PoolEmptyError,
  poolKeyId,
  type AcquireOptions,
  type FailureReason,
  type NodeSource,
  type PoolKey,
  type UpstreamNode,
} from './types.ts';

export type Strategy = 'round_robin' | 'least_connections' | 'random';
export type NodeState = 'ready' | 'cooling';

export interface PoolTuning {
  strategy?: Strategy;
  /** Draw in the background when fewer nodes than this are ready. Default 2. */
  lowWater?: number;
  /** Nodes asked for per draw. Default 5. */
  drawBatch?: number;
  /** Failures within failWindowMs that send a node cooling. Default 2. */
  maxFails?: number;
  failWindowMs?: number;
  coolDownMs?: number;
  /** Upper bound on nodes held; the worst (cooling, then idle oldest) make room for fresh ones. Default 50. */
  maxNodes?: number;
  /** How long an acquire on an empty pool waits for a draw. Default 10 s. */
  acquireTimeoutMs?: number;
  /** First delay after a failed draw, doubled per consecutive failure up to backoffMaxMs. Defaults 1 s, 60 s. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /**
   * A node that went cooling returns to service only after a health probe passes (src/health/prober.ts
   * calls probeDue / recordProbe), not when coolDownMs runs out. Off without a prober.
   */
  probation?: boolean;
  /** Outlier ejection (src/pool/outlier.ts); absent = off. */
  outlier?: OutlierSettings;
  /**
   * A draw that brought no node the pool did not already hold (a backconnect gateway answers the same line
   * every time) is not repeated for this long: the held nodes serve every connection. The quiet ends early
   * when the pool empties or a held node nears its expiry (expiryLeadMs before). Default 60 s.
   */
  redrawAfterMs?: number;
  /** Whether upstream connections may be opened ahead for this pool's nodes (src/proxy/warm.ts). Default true. */
  warm?: boolean;
  /** How long before a node's expiry the pool draws its successor. Default 30 s (a tenth of a shorter life). */
  expiryLeadMs?: number;
}

/** A node's last health probe, for the admin view. */
export interface ProbeRecord {
  at: number;
  ok: boolean;
  latencyMs: number;
  /** why it failed */
  reason?: string;
}

export interface PoolOptions extends PoolTuning {
  key: PoolKey;
  drawer: Drawer;
  now?: () => number;
  random?: () => number;
  metrics?: Metrics;
  logger?: Logger;
}

export interface NodeSnapshot {
  id: string;
  protocol: UpstreamNode['protocol'];
  host: string;
  port: number;
  source: UpstreamNode['source'];
  state: NodeState;
  /** Failures counted in the current window. */
  fails: number;
  activeConnections: number;
  expiresAt?: number;
  coolingUntil?: number;
  lastFailedAt?: number;
  /** cooling, and back in service only after a probe passes */
  awaitingProbe?: boolean;
  lastProbe?: ProbeRecord;
  /** outlier ejection: when the current ejection ends (while ejected), and ejections so far */
  ejectedUntil?: number;
  ejections?: number;
}

export interface PoolSnapshot {
  id: string;
  key: PoolKey;
  strategy: Strategy;
  ready: number;
  cooling: number;
  drawing: boolean;
  /** Set while draws fail: the last draw error's message and when the next draw may start. */
  drawError?: { message: string; code?: string; consecutive: number; retryAt: number };
  /** Set while the last draw brought only nodes already held: no refill before this time (unless needed). */
  quietUntil?: number;
  /** products sold by IP count: IPs left in the package as of the last draw */
  ipsLeft?: number;
  nodes: NodeSnapshot[];
}

interface Entry {
  node: UpstreamNode;
  failTimes: number[];
  coolingUntil: number;
  lastFailedAt: number;
  active: number;
  addedAt: number;
  /** probation: went cooling, waits for a passing probe */
  needsProbe: boolean;
  probing: boolean;
  lastProbe: ProbeRecord | undefined;
  /** last time the node carried a connection or was probed (idle probes pick the stalest) */
  lastSeenAt: number;
  /** outlier ejection's counts (src/pool/outlier.ts); undefined when ejection is off */
  outlier: OutlierState | undefined;
}

/**
 * "Not set" for a time field that later holds a clock reading (Date.now(), not a small integer): -0 is a heap
 * number, so V8 gives the field a double representation from the first object on. Starting at 0 (a small integer)
 * the field turns double at its first real time (the first quiet draw, the first failure) in steady state, and
 * every optimized function that relied on the old layout (acquire, pick, census, the router's dialed)
 * is thrown away and compiled again ("code dependencies"). -0 compares as 0 everywhere.
 */
const NO_TIME = -0;

function newEntry(node: UpstreamNode, now: number, outlier: OutlierState | undefined): Entry {
  return {
    node,
    failTimes: [],
    coolingUntil: NO_TIME,
    lastFailedAt: NO_TIME,
    active: 0,
    addedAt: now,
    needsProbe: false,
    probing: false,
    lastProbe: undefined,
    lastSeenAt: now,
    outlier,
  };
}

/**
 * An entry made at load whose every field is written again with each kind of value it takes later (a probe,
 * a failure, a node drawn again). V8 treats a field written only at creation as constant and one that held one
 * kind of object as typed; the first later write (the first idle probe, some 10 s into traffic) would change
 * that for every entry and throw away each optimized function that relied on it, on the connection path
 * (acquire, pick, census, the router's dialed: "code dependencies"). Written here once, it never changes again.
 * Kept for the process's life (Pool.layout): the entry's map lives as long as an object of it does.
 */
function settledEntry(): Entry {
  const node: UpstreamNode = { id: '', protocol: 'socks5', host: '127.0.0.1', port: 1, source: 'pwd' };
  const e = newEntry(node, NO_TIME, newOutlierState());
  e.node = { ...node, expiresAt: 0.5 };
  e.failTimes = [0.5];
  e.coolingUntil = 0.5;
  e.lastFailedAt = 0.5;
  e.active = 1;
  e.addedAt = 0.5;
  e.needsProbe = true;
  e.probing = true;
  e.lastProbe = { at: 0.5, ok: true, latencyMs: 1 };
  e.lastProbe = { at: 0.5, ok: false, latencyMs: 1, reason: 'x' };
  e.lastSeenAt = 0.5;
  e.outlier = undefined;
  return e;
}

/** Failures that say nothing about the node: the target itself refused. */
const NOT_THE_NODE: ReadonlySet<FailureReason> = new Set(['target_refused']);

function errorCode(err: unknown): string | undefined {
  const code = err && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class Pool implements NodeSource {
  /** The entries' settled layout (settledEntry), kept alive with the class. */
  static readonly layout: object = settledEntry();
  readonly id: string;
  readonly key: PoolKey;
  readonly strategy: Strategy;
  private readonly drawer: Drawer;
  private readonly lowWater: number;
  private readonly drawBatch: number;
  private readonly maxFails: number;
  private readonly failWindowMs: number;
  private readonly coolDownMs: number;
  private readonly maxNodes: number;
  private readonly acquireTimeoutMs: number;
  private readonly backoffBaseMs: number;
  private readonly backoffMaxMs: number;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly metrics: Metrics | undefined;
  private readonly logger: Logger | undefined;
  private readonly probation: boolean;
  private readonly outlier: OutlierDetector | undefined;
  private readonly redrawAfterMs: number;
  private readonly owner: { key: PoolKey; warm: boolean };
  private readonly expiryLeadMs: number;
  /** After a draw that brought nothing new: refills wait until then (see redrawAfterMs). */
  private quietUntil = NO_TIME;

  private entries: Entry[] = [];
  private readonly byId = new Map<string, Entry>();
  private cursor = 0;
  private inflight: Promise<void> | undefined;
  private drawFailures = 0;
  private retryAt = NO_TIME;
  private lastDrawError: unknown;
  private readonly waiters = new Set<(err: Error) => void>();
  private gaugeReady = -1;
  private gaugeCooling = -1;
  private closed = false;

  constructor(options: PoolOptions) {
    this.key = { ...options.key };
    this.id = poolKeyId(options.key);
    this.drawer = options.drawer;
    this.strategy = options.strategy ?? 'round_robin';
    this.lowWater = options.lowWater ?? 2;
    this.drawBatch = Math.max(1, options.drawBatch ?? 5);
    this.maxFails = Math.max(1, options.maxFails ?? 2);
    this.failWindowMs = options.failWindowMs ?? 30_000;
    this.coolDownMs = options.coolDownMs ?? 30_000;
    this.maxNodes = Math.max(1, options.maxNodes ?? 50);
    this.acquireTimeoutMs = options.acquireTimeoutMs ?? 10_000;
    this.backoffBaseMs = options.backoffBaseMs ?? 1_000;
    this.backoffMaxMs = options.backoffMaxMs ?? 60_000;
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.probation = options.probation ?? false;
    this.outlier = options.outlier ? new OutlierDetector(options.outlier) : undefined;
    this.redrawAfterMs = Math.max(0, options.redrawAfterMs ?? 60_000);
    this.owner = { key: this.key, warm: options.warm ?? true };
    this.expiryLeadMs = Math.max(0, options.expiryLeadMs ?? 30_000);
    this.census(this.now());
  }

  async acquire(exclude?: ReadonlySet<string>, options?: AcquireOptions): Promise<UpstreamNode> {
    return this.acquireNow(exclude, options) ?? this.waitForDraw(exclude);
  }

  acquireNow(exclude?: ReadonlySet<string>, options?: AcquireOptions): UpstreamNode | undefined {
    if (this.closed) throw new PoolEmptyError(this.id, 'pool closed');
    const now = this.now();
    this.dropExpired(now);
    const picked = this.pick(exclude, now, options?.readyOnly ?? false);
    this.refillIfLow(now);
    if (!picked && options?.readyOnly) throw new PoolEmptyError(this.id, 'no other node ready');
    if (!picked) return undefined;
    picked.active++;
    picked.lastSeenAt = now;
    return picked.node;
  }

  release(node: UpstreamNode): void {
    const e = this.byId.get(node.id);
    if (e && e.active > 0) e.active--;
  }

  reportFailure(node: UpstreamNode, reason: FailureReason): void {
    if (NOT_THE_NODE.has(reason)) return;
    const e = this.byId.get(node.id);
    if (!e) return;
    const now = this.now();
    e.lastFailedAt = now;
    if (e.outlier) this.judgeOutlier(e, now);
    if (this.isCooling(e, now) || reason === 'auth') {
      // A cooling node used as last resort failed again, or the credential was refused: cool (again) at once.
      this.cool(e, now);
    } else {
      e.failTimes = e.failTimes.filter((t) => now - t < this.failWindowMs);
      e.failTimes.push(now);
      if (e.failTimes.length >= this.maxFails) this.cool(e, now);
    }
    this.census(now);
    this.refillIfLow(now);
  }

  reportSuccess(node: UpstreamNode): void {
    const e = this.byId.get(node.id);
    if (!e) return;
    // Every tunnel's dial ends here: one clock read, no array and no census unless something changed.
    const now = this.now();
    if (e.outlier) this.outlier!.success(e.outlier, now);
    if (e.failTimes.length > 0) e.failTimes = [];
    // Under probation a last-resort success does not end cooling: only a probe does.
    if (e.needsProbe || e.coolingUntil === 0) return;
    const wasCooling = e.coolingUntil > now;
    e.coolingUntil = 0;
    // The gauges move only when this node's state did (time-run-out cool-downs are counted by the next census).
    if (wasCooling) this.census(now);
  }

  // ---- health probes (src/health/prober.ts) ----

  /** Cooling nodes whose cool-down ran out and that wait for a probe (none while one is running). */
  probeDue(): UpstreamNode[] {
    if (!this.probation || this.closed) return [];
    const now = this.now();
    const due: UpstreamNode[] = [];
    for (const e of this.entries) if (e.needsProbe && !e.probing && e.coolingUntil <= now) due.push(e.node);
    return due;
  }

  /**
   * When the first cooling node waiting for a probe is due (its cool-down's end), undefined when none waits:
   * the prober (src/health/prober.ts) arms its timer for it instead of looking every tick.
   */
  nextProbeAt(): number | undefined {
    if (!this.probation || this.closed) return undefined;
    let at: number | undefined;
    for (const e of this.entries) if (e.needsProbe && !e.probing && (at === undefined || e.coolingUntil < at)) at = e.coolingUntil;
    return at;
  }

  /** The ready node idle longest (no connection, not probed lately), for the bounded idle probes. */
  idleCandidate(): UpstreamNode | undefined {
    if (this.closed) return undefined;
    const now = this.now();
    let best: Entry | undefined;
    for (const e of this.entries) {
      if (e.active > 0 || e.probing || this.isCooling(e, now)) continue;
      if (e.node.expiresAt !== undefined && e.node.expiresAt <= now) continue;
      if (!best || e.lastSeenAt < best.lastSeenAt) best = e;
    }
    return best?.node;
  }

  /** A probe started (true) or settled (the record). A pass ends probation; a failure cools the node again. */
  probeStarted(node: UpstreamNode): void {
    const e = this.byId.get(node.id);
    if (e) e.probing = true;
  }

  /** A probe that gave no verdict (the process was out of descriptors): the node may be probed again. */
  probeAbandoned(node: UpstreamNode): void {
    const e = this.byId.get(node.id);
    if (e) e.probing = false;
  }

  recordProbe(node: UpstreamNode, record: ProbeRecord): void {
    const e = this.byId.get(node.id);
    if (!e) return;
    e.probing = false;
    e.lastProbe = record;
    e.lastSeenAt = record.at;
    if (record.ok) {
      if (e.needsProbe)
        this.logger?.info({ pool: this.id, node: e.node.id, latencyMs: record.latencyMs }, 'node passed its probe; back in service');
      e.needsProbe = false;
      e.coolingUntil = 0;
      e.failTimes = [];
    } else {
      e.lastFailedAt = record.at;
      this.cool(e, record.at);
    }
    this.census(this.now());
  }

  isUsable(node: UpstreamNode): boolean {
    const e = this.byId.get(node.id);
    if (!e) return false;
    const now = this.now();
    return !this.isCooling(e, now) && (e.node.expiresAt === undefined || e.node.expiresAt > now);
  }

  /**
   * Why a node is or is not usable: lets a sticky session tell an expired credential ('expired' rotation)
   * from a failing one ('failed'). 'gone': not in this pool (evicted, or never drawn here).
   */
  stateOf(node: UpstreamNode): NodeState | 'expired' | 'gone' {
    const e = this.byId.get(node.id);
    if (!e) return 'gone';
    const now = this.now();
    if (e.node.expiresAt !== undefined && e.node.expiresAt <= now) return 'expired';
    return this.isCooling(e, now) ? 'cooling' : 'ready';
  }

  /**
   * The credentials of every held node are void (the user's sub account was made again, with a new password):
   * they are dropped and the quiet ends, so the next connection draws. Live connections keep their node.
   */
  forgetNodes(): void {
    if (this.entries.length === 0) return;
    this.entries = [];
    this.byId.clear();
    this.quietUntil = 0;
    this.census(this.now());
  }

  /** Nodes and draw state for the admin API; never passwords. */
  snapshot(): PoolSnapshot {
    const now = this.now();
    this.dropExpired(now);
    const ready = this.census(now);
    const cooling = this.gaugeCooling;
    const snap: PoolSnapshot = {
      id: this.id,
      key: { ...this.key },
      strategy: this.strategy,
      ready,
      cooling,
      drawing: this.inflight !== undefined,
      nodes: this.entries.map((e) => {
        const n: NodeSnapshot = {
          id: e.node.id,
          protocol: e.node.protocol,
          host: e.node.host,
          port: e.node.port,
          source: e.node.source,
          state: this.isCooling(e, now) ? 'cooling' : 'ready',
          fails: e.failTimes.filter((t) => now - t < this.failWindowMs).length,
          activeConnections: e.active,
        };
        if (e.node.expiresAt !== undefined) n.expiresAt = e.node.expiresAt;
        if (e.coolingUntil > now) n.coolingUntil = e.coolingUntil;
        if (e.lastFailedAt > 0) n.lastFailedAt = e.lastFailedAt;
        if (e.needsProbe) n.awaitingProbe = true;
        if (e.lastProbe) n.lastProbe = { ...e.lastProbe };
        if (e.outlier && e.outlier.ejections > 0) {
          n.ejections = e.outlier.ejections;
          if (e.outlier.ejectedUntil > now) n.ejectedUntil = e.outlier.ejectedUntil;
        }
        return n;
      }),
    };
    const ipsLeft = this.drawer.status?.().ipsLeft;
    if (ipsLeft !== undefined) snap.ipsLeft = ipsLeft;
    if (this.quietUntil > now) snap.quietUntil = this.quietUntil;
    if (this.drawFailures > 0) {
      const code = errorCode(this.lastDrawError);
      snap.drawError = {
        message: errorMessage(this.lastDrawError),
        consecutive: this.drawFailures,
        retryAt: this.retryAt,
        ...(code ? { code } : {}),
      };
    }
    return snap;
  }

  /** A node is handed out, a draw runs or a client waits for one: the pool must not be evicted now. */
  get busy(): boolean {
    return this.inflight !== undefined || this.waiters.size > 0 || this.entries.some((e) => e.active > 0);
  }

  /** Draws now (the pool is kept warm at start, for instance); resolves when the draw settled. */
  async prefill(): Promise<void> {
    await this.startDraw().catch(() => undefined);
  }

  /** Stops handing out nodes, rejects acquires waiting on a draw and clears this pool's gauges. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const err = new PoolEmptyError(this.id, 'pool closed');
    for (const reject of this.waiters) reject(err);
    this.waiters.clear();
    this.metrics?.poolProxies.remove({ pool: this.id, state: 'ready' });
    this.metrics?.poolProxies.remove({ pool: this.id, state: 'cooling' });
  }

  // ---- selection ----

  private isReady(e: Entry, now: number, exclude: ReadonlySet<string> | undefined): boolean {
    return !this.isCooling(e, now) && !(exclude?.has(e.node.id) ?? false);
  }

  private isCooling(e: Entry, now: number): boolean {
    return e.coolingUntil > now || e.needsProbe;
  }

  /**
   * Outlier ejection's hook: a failure counted; an outlier is ejected (cooled until its ejection ends) while
   * the pool's ejected share allows. A success during the last-resort use or a passing probe ends it early,
   * as Envoy's active health check does.
   */
  private judgeOutlier(e: Entry, now: number): void {
    const detector = this.outlier!;
    const why = detector.failure(e.outlier!, now);
    if (why === undefined) return;
    let ejected = 0;
    for (const other of this.entries) if (other.outlier && detector.isEjected(other.outlier, now) && this.isCooling(other, now)) ejected++;
    if (!detector.mayEject(this.entries.length, ejected)) return;
    const until = detector.eject(e.outlier!, now);
    e.coolingUntil = Math.max(e.coolingUntil, until);
    e.failTimes = [];
    if (this.probation) e.needsProbe = true;
    this.logger?.info(
      { pool: this.id, node: e.node.id, why, untilMs: until - now, ejections: e.outlier!.ejections },
      'node ejected as an outlier',
    );
  }

  private cool(e: Entry, now: number): void {
    e.coolingUntil = Math.max(e.coolingUntil, now + this.coolDownMs);
    e.failTimes = [];
    if (this.probation) e.needsProbe = true;
  }

  private pick(exclude: ReadonlySet<string> | undefined, now: number, readyOnly = false): Entry | undefined {
    const n = this.entries.length;
    if (n === 0) return undefined;
    let chosen: Entry | undefined;
    if (this.strategy === 'random') {
      const ready = this.entries.filter((e) => this.isReady(e, now, exclude));
      if (ready.length > 0) chosen = ready[Math.min(ready.length - 1, Math.floor(this.random() * ready.length))];
    } else {
      // Walk from the cursor so ties (and plain round robin) spread over the nodes.
      let best = -1;
      for (let i = 0; i < n; i++) {
        const idx = (this.cursor + i) % n;
        const e = this.entries[idx]!;
        if (!this.isReady(e, now, exclude)) continue;
        if (best < 0 || e.active < this.entries[best]!.active) best = idx;
        if (this.strategy === 'round_robin' || e.active === 0) break;
      }
      if (best >= 0) {
        chosen = this.entries[best];
        this.cursor = (best + 1) % n;
      }
    }
    if (chosen || readyOnly) return chosen;
    // Last resort: a cooling node beats no node; the one that failed longest ago is likeliest healed.
    for (const e of this.entries) {
      if (exclude?.has(e.node.id)) continue;
      if (!chosen || e.lastFailedAt < chosen.lastFailedAt) chosen = e;
    }
    return chosen;
  }

  // Run per acquire (per tunnel): indexed loops, no iterator result per entry.
  private dropExpired(now: number): void {
    let dropped = false;
    const entries = this.entries;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (e.node.expiresAt !== undefined && e.node.expiresAt <= now) {
        this.byId.delete(e.node.id);
        dropped = true;
      }
    }
    if (dropped) {
      this.entries = this.entries.filter((e) => this.byId.get(e.node.id) === e);
      this.census(now);
    }
  }

  /** Counts ready and cooling nodes and moves the gauges only when a count changed; the ready count (cooling: gaugeCooling). */
  private census(now: number): number {
    let cooling = 0;
    const entries = this.entries;
    for (let i = 0; i < entries.length; i++) if (this.isCooling(entries[i]!, now)) cooling++;
    const ready = entries.length - cooling;
    if (this.metrics && !this.closed) {
      if (ready !== this.gaugeReady) this.metrics.poolProxies.set({ pool: this.id, state: 'ready' }, ready);
      if (cooling !== this.gaugeCooling) this.metrics.poolProxies.set({ pool: this.id, state: 'cooling' }, cooling);
    }
    this.gaugeReady = ready;
    this.gaugeCooling = cooling;
    return ready;
  }

  // ---- drawing ----

  private refillIfLow(now: number): void {
    if (this.closed || this.inflight || now < this.retryAt) return;
    const ready = this.census(now);
    if (ready >= this.lowWater || this.isQuiet(now)) return;
    void this.startDraw().catch(() => undefined);
  }

  /**
   * The last draw brought only nodes already held, and nothing since makes another draw worth a platform call:
   * the pool still holds a node and none of them is near its expiry.
   */
  private isQuiet(now: number): boolean {
    if (now >= this.quietUntil) return false;
    const entries = this.entries;
    if (entries.length === 0) return false;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      const at = e.node.expiresAt;
      if (at !== undefined && at - this.leadFor(e) <= now) return false;
    }
    return true;
  }

  /** A node is replaced this long before it expires: expiryLeadMs, or a tenth of a shorter life. */
  private leadFor(e: Entry): number {
    const at = e.node.expiresAt;
    if (at === undefined) return 0;
    return Math.min(this.expiryLeadMs, Math.max(0, (at - e.addedAt) / 10));
  }

  /** One draw at a time; callers arriving meanwhile share it. */
  private startDraw(): Promise<void> {
    if (this.inflight) return this.inflight;
    const p = Promise.resolve()
      .then(() => this.drawer.draw(this.drawBatch))
      .then((nodes) => {
        if (nodes.length === 0) throw new PoolEmptyError(this.id, 'draw returned no node');
        this.onDrawOk(nodes);
      })
      .catch((err: unknown) => {
        this.onDrawFailed(err);
        throw err;
      })
      .finally(() => {
        if (this.inflight === p) this.inflight = undefined;
      });
    this.inflight = p;
    return p;
  }

  private onDrawOk(nodes: UpstreamNode[]): void {
    const now = this.now();
    if (this.drawFailures > 0) this.logger?.info({ pool: this.id, after: this.drawFailures }, 'pool draws recovered');
    this.drawFailures = 0;
    this.retryAt = 0;
    this.lastDrawError = undefined;
    if (this.closed) return;
    this.dropExpired(now);
    const fresh = new Set<Entry>();
    for (const node of nodes) {
      if (node.expiresAt !== undefined && node.expiresAt <= now) continue;
      setNodeOwner(node, this.owner);
      const known = this.byId.get(node.id);
      if (known) {
        // Drawn again: newer credentials and expiry, same history (its life counts from now).
        known.node = node;
        known.addedAt = now;
        continue;
      }
      const e = newEntry(node, now, this.outlier ? newOutlierState() : undefined);
      this.entries.push(e);
      this.byId.set(node.id, e);
      fresh.add(e);
    }
    this.evictOverflow(now, fresh);
    // Nothing new: the platform answers what the pool holds (a backconnect gateway). Asking again per
    // connection would only spend platform calls; the held nodes serve until the quiet ends.
    this.quietUntil = fresh.size === 0 && this.entries.length > 0 ? now + this.redrawAfterMs : 0;
    if (fresh.size === 0 && this.entries.length > 0 && this.redrawAfterMs > 0) {
      this.logger?.debug(
        { pool: this.id, nodes: this.entries.length, quietMs: this.redrawAfterMs },
        'draw brought only nodes already held; next refill after the quiet',
      );
    }
    this.census(now);
  }

  /** Keeps at most maxNodes: cooling nodes go first (longest cooling first), then idle ready ones, oldest first. */
  private evictOverflow(now: number, fresh: ReadonlySet<Entry>): void {
    let excess = this.entries.length - this.maxNodes;
    if (excess <= 0) return;
    const victims = this.entries
      .filter((e) => !fresh.has(e))
      .sort((a, b) => {
        const ac = this.isCooling(a, now) ? 0 : 1;
        const bc = this.isCooling(b, now) ? 0 : 1;
        if (ac !== bc) return ac - bc;
        if (a.active !== b.active) return a.active - b.active;
        return a.addedAt - b.addedAt;
      });
    for (const v of victims) {
      if (excess <= 0) break;
      this.byId.delete(v.node.id);
      excess--;
    }
    // Still too many (the draw alone exceeded maxNodes): drop the surplus fresh ones.
    this.entries = this.entries.filter((e) => this.byId.get(e.node.id) === e);
    if (this.entries.length > this.maxNodes) {
      for (const e of this.entries.slice(this.maxNodes)) this.byId.delete(e.node.id);
      this.entries = this.entries.slice(0, this.maxNodes);
    }
  }

  private onDrawFailed(err: unknown): void {
    // The account's refusal cost no platform call: no back-off, so a topped-up account draws at once.
    if (err instanceof AccountRefusedError) {
      this.lastDrawError = err;
      return;
    }
    const now = this.now();
    this.drawFailures++;
    this.lastDrawError = err;
    const delay = Math.min(this.backoffMaxMs, this.backoffBaseMs * 2 ** Math.min(30, this.drawFailures - 1));
    this.retryAt = now + delay;
    // Logged on the change from healthy to failing, not on every retry.
    if (this.drawFailures === 1)
      this.logger?.warn({ pool: this.id, err, code: errorCode(err), retryInMs: delay }, 'pool draw failed; backing off');
  }

  private waitForDraw(exclude: ReadonlySet<string> | undefined): Promise<UpstreamNode> {
    const now = this.now();
    // Every held node is excluded (a retry) and a draw would answer the same ones: no platform call.
    if (!this.inflight && this.isQuiet(now)) {
      return Promise.reject(new PoolEmptyError(this.id, 'no other node: the platform answers only the nodes already held'));
    }
    if (!this.inflight && now < this.retryAt) {
      const failure = new PoolEmptyError(
        this.id,
        `draws failing (${errorCode(this.lastDrawError) ?? 'error'}: ${errorMessage(this.lastDrawError)}); next draw in ${this.retryAt - now} ms`,
      );
      (failure as Error & { cause?: unknown }).cause = this.lastDrawError;
      return Promise.reject(failure);
    }
    const draw = this.startDraw();
    return new Promise<UpstreamNode>((resolve, reject) => {
      let settled = false;
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.waiters.delete(onClose);
        fn();
      };
      const onClose = (err: Error) => finish(() => reject(err));
      this.waiters.add(onClose);
      const timer = setTimeout(
        () => finish(() => reject(new PoolEmptyError(this.id, `no node within ${this.acquireTimeoutMs} ms (draw still running)`))),
        this.acquireTimeoutMs,
      );
      draw.then(
        () =>
          finish(() => {
            const t = this.now();
            this.dropExpired(t);
            const e = this.pick(exclude, t);
            if (!e) return reject(new PoolEmptyError(this.id, 'the draw brought no usable node'));
            e.active++;
            e.lastSeenAt = t;
            resolve(e.node);
          }),
        (err: unknown) => {
          const failure = new PoolEmptyError(this.id, `draw failed (${errorCode(err) ?? 'error'}: ${errorMessage(err)})`);
          (failure as Error & { cause?: unknown }).cause = err;
          finish(() => reject(failure));
        },
      );
    });
  }
}
