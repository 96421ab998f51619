// One client's dial as a race (Router.dial): the first node is dialed; when it has not finished its handshake
// after the hedge delay, the next node is dialed in parallel, and the first tunnel up carries the connection.
// The other is cancelled and, when it had stalled past the hedge delay, marked like a failed node; a node
// that fails outright is marked and replaced (proxy.retries). A client that leaves cancels every attempt,
// and what was learnt still counts: an attempt stalled past the hedge delay is a failure of its node.
// The hedge delays of all races wait in one queue per delay (start order is due order), with one timer armed
// for the queue's head: an attempt costs no timer of its own, and each hedge still starts at its delay.
import { AccountRefusedError } from '../pool/account-refusal.ts';
import { PoolEmptyError, type FailureReason, type NodeSource, type UpstreamNode } from '../pool/types.ts';
import type { HandshakeTimes } from './handshake-times.ts';
import { DrawNotAllowedError } from '../pool/planned-drawer.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { DialCancel, type DialSignal } from './cancel.ts';
import type { DialAnswer, DialOptions, Tunnel } from './dial-http.ts';
import type { DialOutcome, RaceWon } from './dial-job.ts';
import { DialAbortedError, GatewayError, UpstreamDialError } from './errors.ts';

/** Label `outcome` of rotor_upstream_hedges_total, one count per hedge started. */
export type HedgeOutcome = 'won' | 'lost' | 'failed' | 'abandoned';

export interface RaceSpec {
  source: NodeSource;
  /** A sticky session's node, tried first (not acquired, so not released). */
  sticky?: UpstreamNode | undefined;
  /** One attempt's dial: its promise, or null when the dialer answers through `options.answer`. */
  dial: (node: UpstreamNode, options: DialOptions) => Promise<Tunnel> | null;
  /** Where the race leaves its end (the winner or the error) before calling its promise's own resolve. */
  outcome: DialOutcome;
  signal?: DialSignal | undefined;
  /** Absolute deadline on `now`'s clock. */
  deadline: number;
  now: () => number;
  connectTimeoutMs: number;
  handshakeTimeoutMs: number;
  /** Further nodes tried after failures. */
  retries: number;
  /** Parallel dials started because an attempt was slow. */
  maxHedges: number;
  hedgeDelayMs: number;
  times: HandshakeTimes;
  /** A node failed (or stalled): tell its pool, rotate a sticky session. */
  onNodeFailed: (node: UpstreamNode, reason: FailureReason, sticky: boolean) => void;
  /** A drawn node's upstream refused the account (src/pool/account-refusal.ts): have its balance read again. */
  onAccountRefused?: (node: UpstreamNode) => void;
  /** A node marked 'stalled' when a hedge won answered after all, within the grace: forgive it. */
  onNodeAnswered?: (node: UpstreamNode) => void;
  /** What the client is told of the last upstream failure (never the node's address); default its message. */
  clientMessage?: (err: UpstreamDialError) => string;
  /** The connection record's counters (src/connlog DialTrace), kept up to date as attempts start. */
  trace?: { retries: number; hedges: number } | undefined;
  /** How long a loser marked stalled may still answer and be forgiven (then it is closed). Default 1000 ms. */
  graceMs?: number;
  metrics?: Metrics | undefined;
}

export type { RaceWon };

/** One node's dial in a race: also what its dialer answers (DialAnswer), so no promise reaction or closure per attempt. */
class Attempt implements DialAnswer {
  readonly cancel = new DialCancel();
  readonly startedAt = performance.now();
  /** the grace's timer of a loser on probation */
  timer: NodeJS.Timeout | undefined = undefined;
  /** when its hedge is due (performance.now), while it waits in its delay's queue */
  hedgeDue = 0;
  /** waiting for its hedge (cleared when it ends or its hedge is due) */
  hedgeArmed = false;
  /** its place in its delay's queue while it waits there (HedgeQueue.base counts the places spliced off) */
  hedgeSlot = 0;
  /** marked 'stalled' when a hedge won; still running for the grace, forgiven if it answers */
  onProbation = false;

  constructor(
    readonly node: UpstreamNode,
    readonly sticky: boolean,
    readonly hedge: boolean,
    readonly race: Race,
    readonly takesFlowing: boolean,
  ) {}

  answered(tunnel: Tunnel): void {
    this.race.won(this, tunnel);
  }

  failed(err: unknown): void {
    this.race.failed(this, err);
  }
}

const ACCOUNT_REFUSED_MESSAGE = "the platform refused the user's account (no traffic left, or disabled); its balance is being read again";

/**
 * Every node a draw brought carries the same account (its sub account's credentials): an upstream refusing
 * them (SOCKS5 auth failure or NotAllowed, HTTP 401/403/407) refuses the account, whatever node answered.
 * A static instance's credentials are its own, so its refusal stays the node's.
 */
function accountRefusal(node: UpstreamNode, err: UpstreamDialError): boolean {
  return err.reason === 'auth' && node.source !== 'instance';
}

/**
 * Runs the race; its end is left in `spec.outcome` (the winner or the error) and told by the outcome's resolve.
 * A node ready now is dialed in this same turn.
 */
export function startRace(spec: RaceSpec): void {
  new Race(spec).start();
}

/**
 * The race's state and steps as one object: a dial that answers at once costs this object and its attempt
 * (the dialer answers the attempt: no promise of its own), and its timers call module functions.
 */
class Race {
  /** Attempts running: a shared empty list until the first (then `[a]`, sized to one: most races run one attempt). */
  private pending: Attempt[] = NO_ATTEMPTS;
  /** The first node tried; with it alone no set is made (most dials try one node). */
  private firstId: string | undefined;
  /** Nodes tried so far; made when a second node is tried. */
  private exclude: Set<string> | undefined;
  private acquiring = 0;
  private settled = false;
  private last: UpstreamDialError | undefined;
  private poolEmpty: PoolEmptyError | undefined;
  private retries = 0;
  private hedges = 0;

  constructor(private readonly spec: RaceSpec) {}

  private reject(err: Error): void {
    const outcome = this.spec.outcome;
    outcome.error = err;
    outcome.resolve(outcome);
  }

  start(): void {
    const signal = this.spec.signal;
    if (signal?.aborted) {
      this.settled = true;
      this.reject(new GatewayError('DIAL_ABORTED', 'the client went away'));
      return;
    }
    // The race is its own abort listener (handleEvent): no closure per dial.
    signal?.addEventListener('abort', this, ONCE);
    this.launch(true, false);
  }

  /** The client's abort (the dial's signal). */
  handleEvent(): void {
    this.clientGone();
  }

  private countHedges(outcome: HedgeOutcome): void {
    const metrics = this.spec.metrics;
    const hedges = this.hedges;
    if (hedges === 0 || !metrics) return;
    if (outcome === 'won') {
      metrics.upstreamHedges.inc({ outcome: 'won' });
      if (hedges > 1) metrics.upstreamHedges.inc({ outcome: 'lost' }, hedges - 1);
    } else metrics.upstreamHedges.inc({ outcome }, hedges);
  }

  stop(a: Attempt): void {
    if (a.hedgeArmed) leaveHedgeQueue(a, this.spec.hedgeDelayMs);
    a.hedgeArmed = false;
    clearTimeout(a.timer);
    const pending = this.pending;
    // The common end (the one attempt answered): no splice, whose result is an array of its own.
    if (pending.length === 1 && pending[0] === a) this.pending = NO_ATTEMPTS;
    else {
      const i = pending.indexOf(a);
      if (i >= 0) pending.splice(i, 1);
    }
  }

  private release(a: Attempt): void {
    if (!a.sticky) this.spec.source.release(a.node);
  }

  /**
   * Cancels the attempts still running; those stalled past the hedge delay are their node's failure. When a
   * hedge won (`grace`), such a loser is marked at once (so the next connections avoid it) but left to
   * answer for a short grace: a node merely slowed (a loaded machine, a long route) that answers then is
   * forgiven and closed; one still silent is counted a stall and cancelled.
   */
  private cancelRest(grace: boolean): void {
    if (this.pending.length === 0) return;
    const spec = this.spec;
    // The same millisecond of slack as the hedge queue's (onHedgeQueue): a hedge it started up to 1 ms before the
    // delay by performance.now, and won within that millisecond, still marks the attempt it hedged.
    const t = performance.now() + 1;
    for (const a of this.pending.slice()) {
      const stalled = t - a.startedAt >= spec.hedgeDelayMs;
      if (stalled) spec.onNodeFailed(a.node, 'stalled', a.sticky);
      if (stalled && grace) {
        clearTimeout(a.timer);
        a.onProbation = true;
        a.timer = setTimeout(onGraceOver, spec.graceMs ?? 1000, this, a);
        a.timer.unref?.();
        continue;
      }
      this.stop(a);
      if (stalled) spec.metrics?.upstreamFailures.inc({ reason: 'stalled' });
      a.cancel.abort();
    }
  }

  /** A loser on probation stayed silent through the grace: a stall. */
  graceOver(a: Attempt): void {
    if (!this.pending.includes(a)) return;
    this.stop(a);
    this.spec.metrics?.upstreamFailures.inc({ reason: 'stalled' });
    a.cancel.abort();
  }

  private clientGone(): void {
    if (this.settled) return;
    this.settled = true;
    this.cancelRest(false);
    this.countHedges('abandoned');
    this.reject(new GatewayError('DIAL_ABORTED', 'the client went away'));
  }

  private fail(err: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.spec.signal?.removeEventListener('abort', this);
    this.cancelRest(false);
    this.countHedges('failed');
    this.reject(err);
  }

  private endIfIdle(): void {
    if (this.settled || this.pending.length > 0 || this.acquiring > 0) return;
    const last = this.last;
    if (last)
      this.fail(
        new GatewayError(
          last.timedOut ? 'UPSTREAM_TIMEOUT' : 'UPSTREAM_FAILED',
          this.spec.clientMessage?.(last) ?? last.message,
          last.reason,
        ),
      );
    else if (this.poolEmpty) {
      this.spec.metrics?.upstreamFailures.inc({ reason: 'no_upstream' });
      // A product's refusal names what to change: it reaches the client, not only /v1/pools. Other draw
      // failures stay in /v1/pools (they may name the platform's hosts).
      const refusal = (this.poolEmpty as { cause?: unknown }).cause;
      if (refusal instanceof AccountRefusedError) return this.fail(new GatewayError('ACCOUNT_REFUSED', refusal.message));
      this.fail(
        new GatewayError(
          'NO_UPSTREAM',
          refusal instanceof DrawNotAllowedError ? `no upstream available: ${refusal.message}` : 'no upstream available',
        ),
      );
    } else this.fail(new GatewayError('UPSTREAM_TIMEOUT', 'no upstream answered before the deadline', 'connect_timeout'));
  }

  won(a: Attempt, tunnel: Tunnel): void {
    this.stop(a);
    const spec = this.spec;
    if (this.settled) {
      // Lost the race (or the client left): the node answered, its tunnel is not needed.
      tunnel.socket.destroy();
      this.release(a);
      if (a.onProbation) this.forgive(a);
      return;
    }
    spec.times.record(performance.now() - a.startedAt);
    this.settled = true;
    spec.signal?.removeEventListener('abort', this);
    this.cancelRest(true);
    this.countHedges(a.hedge ? 'won' : 'lost');
    const outcome = spec.outcome;
    outcome.won = { tunnel, node: a.node, sticky: a.sticky, acquired: !a.sticky, retries: this.retries, hedges: this.hedges };
    outcome.resolve(outcome);
  }

  /** A loser on probation answered within the grace: its 'stalled' mark is taken back. */
  private forgive(a: Attempt): void {
    this.spec.metrics?.upstreamStallsForgiven.inc();
    this.spec.onNodeAnswered?.(a.node);
  }

  failed(a: Attempt, err: unknown): void {
    this.stop(a);
    this.release(a);
    if (err instanceof DialAbortedError) return; // cancelled by this race: accounted for where it was cancelled
    if (!(err instanceof UpstreamDialError)) {
      this.fail(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    const spec = this.spec;
    if (this.settled) {
      if (a.onProbation) {
        // Marked 'stalled' when the hedge won; it answered (the target refused) or it failed: settle that.
        if (err.reason === 'target_refused') this.forgive(a);
        else spec.metrics?.upstreamFailures.inc({ reason: 'stalled' });
      } else if (err.reason !== 'target_refused' && !accountRefusal(a.node, err)) spec.onNodeFailed(a.node, err.reason, a.sticky);
      return;
    }
    this.last = err;
    if (accountRefusal(a.node, err)) {
      // Not the node's fault and no other node's cure: the customer is refused with the reason, no node cools.
      spec.onAccountRefused?.(a.node);
      this.fail(new GatewayError('ACCOUNT_REFUSED', ACCOUNT_REFUSED_MESSAGE));
      return;
    }
    // The target's own refusal says nothing about the node, and another node would be refused too.
    if (err.reason === 'target_refused') {
      if (this.pending.length === 0 && this.acquiring === 0) this.endIfIdle();
      return;
    }
    spec.onNodeFailed(a.node, err.reason, a.sticky);
    if (this.retries < spec.retries && spec.deadline > spec.now()) {
      this.retries++;
      if (spec.trace) spec.trace.retries = this.retries;
      this.launch(false, false);
    } else this.endIfIdle();
  }

  hedgeTimer(a: Attempt): void {
    if (this.settled || !this.pending.includes(a) || this.hedges >= this.spec.maxHedges) return;
    this.launch(false, true);
  }

  /**
   * Starts one attempt: the sticky node first, else a node from the source. A node ready now (acquireNow)
   * is dialed in this same turn; only a pool that must wait for a draw costs the awaited acquire.
   */
  private launch(first: boolean, hedge: boolean): void {
    if (this.settled) return;
    const spec = this.spec;
    if (first && spec.sticky !== undefined) {
      this.attempt(spec.sticky, true, hedge);
      return;
    }
    const source = spec.source;
    if (source.acquireNow !== undefined) {
      let node: UpstreamNode | undefined;
      try {
        node = source.acquireNow(this.tried(), hedge ? READY_ONLY : undefined);
      } catch (err) {
        this.acquireFailed(err, hedge);
        return;
      }
      if (node !== undefined) {
        this.attempt(node, false, hedge);
        return;
      }
    }
    void this.acquireThenAttempt(hedge);
  }

  /** The nodes tried so far, to exclude from the next pick. */
  private tried(): ReadonlySet<string> {
    if (this.exclude !== undefined) return this.exclude;
    if (this.firstId === undefined) return NONE;
    this.exclude = new Set([this.firstId]);
    return this.exclude;
  }

  /** A node the source can only give after a wait (a draw), then the attempt. */
  private async acquireThenAttempt(hedge: boolean): Promise<void> {
    let node: UpstreamNode;
    this.acquiring++;
    try {
      node = await this.spec.source.acquire(this.tried(), hedge ? READY_ONLY : undefined);
    } catch (err) {
      this.acquiring--;
      this.acquireFailed(err, hedge);
      return;
    }
    this.acquiring--;
    if (this.settled) {
      this.spec.source.release(node);
      return;
    }
    this.attempt(node, false, hedge);
  }

  private acquireFailed(err: unknown, hedge: boolean): void {
    if (!(err instanceof PoolEmptyError)) return this.fail(err instanceof Error ? err : new Error(String(err)));
    if (hedge) return; // no other node ready: the running attempt goes on alone
    this.poolEmpty = err;
    this.endIfIdle();
  }

  /** Dials `node` (acquired unless `sticky`) as one attempt of the race. */
  private attempt(node: UpstreamNode, sticky: boolean, hedge: boolean): void {
    const spec = this.spec;
    const remaining = spec.deadline - spec.now();
    if (remaining <= 0) {
      if (!sticky) spec.source.release(node);
      this.endIfIdle();
      return;
    }
    if (this.firstId === undefined) this.firstId = node.id;
    else (this.exclude ??= new Set([this.firstId])).add(node.id);
    if (hedge) {
      this.hedges++;
      if (spec.trace) spec.trace.hedges = this.hedges;
    }
    const a = new Attempt(node, sticky, hedge, this, spec.outcome.takesFlowing === true);
    // An emptied list would grow a backing store of 17 on its next push: the first attempt gets a list of one.
    if (this.pending.length === 0) this.pending = [a];
    else this.pending.push(a);
    if (this.hedges < spec.maxHedges) awaitHedge(a, spec.hedgeDelayMs);
    const options: DialOptions = {
      connectTimeoutMs: Math.min(spec.connectTimeoutMs, remaining),
      handshakeTimeoutMs: Math.min(spec.handshakeTimeoutMs, remaining),
      signal: a.cancel,
      answer: a,
    };
    if (spec.metrics) options.metrics = spec.metrics;
    let dialing: Promise<Tunnel> | null;
    try {
      dialing = spec.dial(node, options);
    } catch (err) {
      // A dialer that throws at once fails this attempt as its rejection would.
      this.failed(a, err);
      return;
    }
    dialing?.then(
      (tunnel) => a.answered(tunnel),
      (err: unknown) => a.failed(err),
    );
  }
}

const READY_ONLY = { readyOnly: true } as const;
const ONCE = { once: true } as const;
/** Shared by every race before its first attempt: never written (attempt() replaces it). */
const NO_ATTEMPTS: Attempt[] = [];
/** The exclusions of a race's first node (none): shared, never written. */
const NONE: ReadonlySet<string> = new Set();

/**
 * Attempts waiting for their hedge delay, in start order; `head` is the first not yet passed. An attempt that
 * ends leaves its place empty at once: the queue must not hold a finished dial (its race, and through the race
 * the tunnel it made) until its delay passes, or every tunnel outlives a scavenge or two.
 */
interface HedgeQueue {
  delayMs: number;
  items: (Attempt | undefined)[];
  head: number;
  /** places spliced off the front so far: an attempt's place is items[a.hedgeSlot - base] */
  base: number;
  timer: NodeJS.Timeout | undefined;
}

/** One queue per hedge delay (one per configured value in practice). */
const hedgeQueues = new Map<number, HedgeQueue>();

function awaitHedge(a: Attempt, delayMs: number): void {
  let q = hedgeQueues.get(delayMs);
  if (q === undefined) {
    q = { delayMs, items: [], head: 0, base: 0, timer: undefined };
    hedgeQueues.set(delayMs, q);
  }
  // The attempt was made in this turn: its start is now (no second clock reading).
  a.hedgeDue = a.startedAt + delayMs;
  a.hedgeArmed = true;
  a.hedgeSlot = q.base + q.items.length;
  q.items.push(a);
  if (q.timer === undefined) armHedges(q, delayMs);
}

function armHedges(q: HedgeQueue, ms: number): void {
  q.timer = setTimeout(onHedgeQueue, ms, q);
  q.timer.unref();
}

/**
 * The queue's timer: every attempt whose delay has passed and that still runs gets its hedge (those that ended
 * are passed over), then the timer is armed again for the next one still waiting. Node's timers run on the
 * loop's clock, which may lag performance.now by under a millisecond: such an attempt counts as due.
 */
function onHedgeQueue(q: HedgeQueue): void {
  const items = q.items;
  const now = performance.now() + 1;
  let next: Attempt | undefined;
  while (q.head < items.length) {
    const a = items[q.head];
    if (a !== undefined && a.hedgeArmed && a.hedgeDue > now) {
      next = a;
      break;
    }
    items[q.head++] = undefined;
    if (a === undefined || !a.hedgeArmed) continue;
    a.hedgeArmed = false;
    // A hedge started here queues its own attempt behind; q.timer is still set, so it arms nothing.
    a.race.hedgeTimer(a);
  }
  if (next === undefined) {
    q.base += items.length;
    items.length = 0;
    q.head = 0;
    q.timer = undefined;
    return;
  }
  if (q.head > 64) {
    items.splice(0, q.head);
    q.base += q.head;
    q.head = 0;
  }
  armHedges(q, Math.max(1, next.hedgeDue - performance.now()));
}

/** An attempt that ended while waiting for its hedge: its place in the queue is emptied. */
function leaveHedgeQueue(a: Attempt, delayMs: number): void {
  const q = hedgeQueues.get(delayMs);
  if (q === undefined) return;
  const i = a.hedgeSlot - q.base;
  if (i >= q.head && q.items[i] === a) q.items[i] = undefined;
}

/** Attempts `delayMs`'s queue holds (tests). */
export function hedgesWaiting(delayMs: number): number {
  let n = 0;
  for (const a of hedgeQueues.get(delayMs)?.items ?? []) if (a !== undefined) n++;
  return n;
}

function onGraceOver(race: Race, a: Attempt): void {
  race.graceOver(a);
}
