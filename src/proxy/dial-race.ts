// One client's dial as a race (Router.dial): the first node is dialed; when it has not finished its handshake
// after the hedge delay, the next node is dialed in parallel, and the first tunnel up carries the connection.
// The other is cancelled and, when it had stalled past the hedge delay, marked like a failed node; a node
// that fails outright is marked and replaced (proxy.retries). A client that leaves cancels every attempt,
// and what was learnt still counts: an attempt stalled past the hedge delay is a failure of its node.
// Timers, one per running attempt, are the only cost; a dial that answers before the delay pays nothing more.
import { PoolEmptyError, type FailureReason, type NodeSource, type UpstreamNode } from '../pool/types.ts';
import type { HandshakeTimes } from '../health/handshake-times.ts';
import { DrawNotAllowedError } from '../pool/planned-drawer.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { DialCancel, type DialSignal } from './cancel.ts';
import type { DialOptions, Tunnel } from './dial-http.ts';
import { DialAbortedError, GatewayError, UpstreamDialError } from './errors.ts';

/** Label `outcome` of rotor_upstream_hedges_total, one count per hedge started. */
export type HedgeOutcome = 'won' | 'lost' | 'failed' | 'abandoned';

export interface RaceSpec {
  source: NodeSource;
  /** A sticky session's node, tried first (not acquired, so not released). */
  sticky?: UpstreamNode;
  dial: (node: UpstreamNode, options: DialOptions) => Promise<Tunnel>;
  signal?: DialSignal;
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
  /** A node marked 'stalled' when a hedge won answered after all, within the grace: forgive it. */
  onNodeAnswered?: (node: UpstreamNode) => void;
  /** What the client is told of the last upstream failure (never the node's address); default its message. */
  clientMessage?: (err: UpstreamDialError) => string;
  /** The connection record's counters (src/connlog DialTrace), kept up to date as attempts start. */
  trace?: { retries: number; hedges: number };
  /** How long a loser marked stalled may still answer and be forgiven (then it is closed). Default 1000 ms. */
  graceMs?: number;
  metrics?: Metrics;
}

export interface RaceWon {
  tunnel: Tunnel;
  node: UpstreamNode;
  sticky: boolean;
  /** acquired from the source: release it when the connection ends */
  acquired: boolean;
  retries: number;
  hedges: number;
}

interface Attempt {
  node: UpstreamNode;
  sticky: boolean;
  hedge: boolean;
  cancel: DialCancel;
  startedAt: number;
  timer: NodeJS.Timeout | undefined;
  /** marked 'stalled' when a hedge won; still running for the grace, forgiven if it answers */
  onProbation: boolean;
}

export function raceDial(spec: RaceSpec): Promise<RaceWon> {
  const { source, metrics } = spec;
  return new Promise<RaceWon>((resolve, reject) => {
    const pending = new Set<Attempt>();
    const exclude = new Set<string>();
    let acquiring = 0;
    let settled = false;
    let last: UpstreamDialError | undefined;
    let poolEmpty: PoolEmptyError | undefined;
    let retries = 0;
    let hedges = 0;
    let hedgeWinner = false;

    const countHedges = (outcome: HedgeOutcome): void => {
      if (hedges === 0 || !metrics) return;
      if (outcome === 'won') {
        metrics.upstreamHedges.inc({ outcome: 'won' });
        if (hedges > 1) metrics.upstreamHedges.inc({ outcome: 'lost' }, hedges - 1);
      } else metrics.upstreamHedges.inc({ outcome }, hedges);
    };
    const stop = (a: Attempt): void => {
      clearTimeout(a.timer);
      pending.delete(a);
    };
    const release = (a: Attempt): void => {
      if (!a.sticky) source.release(a.node);
    };
    /**
     * Cancels the attempts still running; those stalled past the hedge delay are their node's failure. When a
     * hedge won (`grace`), such a loser is marked at once (so the next connections avoid it) but left to
     * answer for a short grace: a node merely slowed (a loaded machine, a long route) that answers then is
     * forgiven and closed; one still silent is counted a stall and cancelled.
     */
    const cancelRest = (grace: boolean): void => {
      const t = performance.now();
      for (const a of [...pending]) {
        const stalled = t - a.startedAt >= spec.hedgeDelayMs;
        if (stalled) spec.onNodeFailed(a.node, 'stalled', a.sticky);
        if (stalled && grace) {
          clearTimeout(a.timer);
          a.onProbation = true;
          a.timer = setTimeout(() => {
            if (!pending.has(a)) return;
            stop(a);
            metrics?.upstreamFailures.inc({ reason: 'stalled' });
            a.cancel.abort();
          }, spec.graceMs ?? 1000);
          a.timer.unref?.();
          continue;
        }
        stop(a);
        if (stalled) metrics?.upstreamFailures.inc({ reason: 'stalled' });
        a.cancel.abort();
      }
    };
    const onClientAbort = (): void => {
      if (settled) return;
      settled = true;
      cancelRest(false);
      countHedges('abandoned');
      reject(new GatewayError('DIAL_ABORTED', 'the client went away'));
    };
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      spec.signal?.removeEventListener('abort', onClientAbort);
      cancelRest(false);
      countHedges('failed');
      reject(err);
    };
    const endIfIdle = (): void => {
      if (settled || pending.size > 0 || acquiring > 0) return;
      if (last) fail(new GatewayError(last.timedOut ? 'UPSTREAM_TIMEOUT' : 'UPSTREAM_FAILED', spec.clientMessage?.(last) ?? last.message, last.reason));
      else if (poolEmpty) {
        metrics?.upstreamFailures.inc({ reason: 'no_upstream' });
        // A product's refusal names what to change: it reaches the client, not only /v1/pools. Other draw
        // failures stay in /v1/pools (they may name the platform's hosts).
        const refusal = (poolEmpty as { cause?: unknown }).cause;
        fail(new GatewayError('NO_UPSTREAM', refusal instanceof DrawNotAllowedError ? `no upstream available: ${refusal.message}` : 'no upstream available'));
      } else fail(new GatewayError('UPSTREAM_TIMEOUT', 'no upstream answered before the deadline', 'connect_timeout'));
    };

    const won = (a: Attempt, tunnel: Tunnel): void => {
      stop(a);
      if (settled) {
        // Lost the race (or the client left): the node answered, its tunnel is not needed.
        tunnel.socket.destroy();
        release(a);
        if (a.onProbation) spec.onNodeAnswered?.(a.node);
        return;
      }
      spec.times.record(performance.now() - a.startedAt);
      settled = true;
      spec.signal?.removeEventListener('abort', onClientAbort);
      hedgeWinner = a.hedge;
      cancelRest(true);
      countHedges(hedgeWinner ? 'won' : 'lost');
      resolve({ tunnel, node: a.node, sticky: a.sticky, acquired: !a.sticky, retries, hedges });
    };

    const failed = (a: Attempt, err: unknown): void => {
      stop(a);
      release(a);
      if (err instanceof DialAbortedError) return; // cancelled by this race: accounted for where it was cancelled
      if (!(err instanceof UpstreamDialError)) {
        fail(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      if (settled) {
        if (a.onProbation) {
          // Marked 'stalled' when the hedge won; it answered (the target refused) or it failed: settle that.
          if (err.reason === 'target_refused') spec.onNodeAnswered?.(a.node);
          else metrics?.upstreamFailures.inc({ reason: 'stalled' });
        } else if (err.reason !== 'target_refused') spec.onNodeFailed(a.node, err.reason, a.sticky);
        return;
      }
      last = err;
      // The target's own refusal says nothing about the node, and another node would be refused too.
      if (err.reason === 'target_refused') {
        if (pending.size === 0 && acquiring === 0) endIfIdle();
        return;
      }
      spec.onNodeFailed(a.node, err.reason, a.sticky);
      if (retries < spec.retries && spec.deadline > spec.now()) {
        retries++;
        if (spec.trace) spec.trace.retries = retries;
        void launch(false, false);
      } else endIfIdle();
    };

    const onHedgeTimer = (a: Attempt): void => {
      a.timer = undefined;
      if (settled || !pending.has(a) || hedges >= spec.maxHedges) return;
      void launch(false, true);
    };

    const launch = async (first: boolean, hedge: boolean): Promise<void> => {
      if (settled) return;
      let node: UpstreamNode;
      const sticky = first && spec.sticky !== undefined;
      if (sticky) node = spec.sticky!;
      else {
        acquiring++;
        try {
          node = await source.acquire(exclude, hedge ? { readyOnly: true } : undefined);
        } catch (err) {
          acquiring--;
          if (!(err instanceof PoolEmptyError)) return fail(err instanceof Error ? err : new Error(String(err)));
          if (hedge) return; // no other node ready: the running attempt goes on alone
          poolEmpty = err;
          // A hedge with no other node to try: the running attempt goes on alone.
          endIfIdle();
          return;
        }
        acquiring--;
      }
      if (settled) {
        if (!sticky) source.release(node);
        return;
      }
      const remaining = spec.deadline - spec.now();
      if (remaining <= 0) {
        if (!sticky) source.release(node);
        endIfIdle();
        return;
      }
      exclude.add(node.id);
      if (hedge) {
        hedges++;
        if (spec.trace) spec.trace.hedges = hedges;
      }
      const a: Attempt = { node, sticky, hedge, cancel: new DialCancel(), startedAt: performance.now(), timer: undefined, onProbation: false };
      pending.add(a);
      if (hedges < spec.maxHedges) {
        a.timer = setTimeout(() => onHedgeTimer(a), spec.hedgeDelayMs);
        a.timer.unref?.();
      }
      spec
        .dial(node, {
          connectTimeoutMs: Math.min(spec.connectTimeoutMs, remaining),
          handshakeTimeoutMs: Math.min(spec.handshakeTimeoutMs, remaining),
          signal: a.cancel,
          ...(metrics ? { metrics } : {}),
        })
        .then(
          (tunnel) => won(a, tunnel),
          (err: unknown) => failed(a, err),
        );
    };

    if (spec.signal?.aborted) {
      reject(new GatewayError('DIAL_ABORTED', 'the client went away'));
      return;
    }
    spec.signal?.addEventListener('abort', onClientAbort, { once: true });
    void launch(true, false);
  });
}
