// The descriptors the daemon's other HTTP listeners (the admin API, the platform's callbacks, the portal's own
// listener) may hold together, so that a flood on those ports cannot take the descriptors the customers' tunnels
// need. Their per-listener caps (src/admin/http-limits.ts: 1,024 admin, 256 callbacks, 1,024 portal) are counts,
// not shares of the process's limit: under a 1,024 soft RLIMIT_NOFILE one listener alone could hold every
// descriptor, and the proxy (src/proxy/accept-guard.ts) then refuses every customer. Here the three together hold
// at most an eighth of the soft limit (at least 32); a connection past it closes the oldest idle one (no request
// in flight) of whichever listener holds the most, or is refused when all are busy — unless its own listener
// holds fewer than its reserve (8), so that one listener's busy clients (a portal's POSTs whose bodies never
// come) cannot lock the operator or the platform out of theirs. Descriptors are the process's: one budget per process (`sideDescriptors`). It sits with the
// process-wide exhaustion report (failed-accept.ts), below every folder, so the admin and portal listeners and the
// proxy's guard can all reach it without climbing the folder order (docs/architecture.md).
import { readFileSync } from 'node:fs';

/** A listener under the budget: how many it holds, and closing its oldest idle connection (true when it did). */
export interface BudgetedListener {
  held(): number;
  shedIdle(): boolean;
}

export interface DescriptorBudgetOptions {
  /** The process's soft descriptor limit (Infinity: none; undefined: cannot be read now); default /proc/self/limits. */
  limit?: () => number | undefined;
  /** Share of the limit; default 1/8. */
  share?: number;
  /** The budget is never below this; default 32. */
  floor?: number;
  /** Connections each listener may hold even past the budget (so no listener's clients lock another's out); default 8. */
  reserve?: number;
}

/**
 * The soft "Max open files" of /proc/self/limits: Infinity when unlimited or not Linux, undefined when it cannot
 * be read now (no descriptor left to read it with).
 */
function procSoftLimit(): number | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/self/limits', 'utf8');
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT' ? Infinity : undefined;
  }
  const m = /^Max open files\s+(\d+)/m.exec(text);
  return m ? Number(m[1]) : Infinity;
}

/** The limit is read again after this long, or after this many connections (a limit lowered while running). */
const REREAD_MS = 1000;
const REREAD_TAKES = 16;

export class DescriptorBudget {
  private readonly readLimit: () => number | undefined;
  private readonly share: number;
  private readonly floor: number;
  private readonly reserve: number;
  private readonly listeners = new Set<BudgetedListener>();
  private held = 0;
  private limit = Infinity;
  private readAt = -Infinity;
  private takesSinceRead = 0;
  /** Connections refused because every held one was busy (tests read it). */
  refused = 0;

  constructor(options: DescriptorBudgetOptions = {}) {
    this.readLimit = options.limit ?? procSoftLimit;
    this.share = options.share ?? 1 / 8;
    this.floor = options.floor ?? 32;
    this.reserve = options.reserve ?? 8;
  }

  /** Connections held now across every listener under the budget. */
  get inUse(): number {
    return this.held;
  }

  /** How many they may hold: a share of the soft limit, at least the floor. */
  get max(): number {
    return Number.isFinite(this.limit) ? Math.max(this.floor, Math.floor(this.limit * this.share)) : Infinity;
  }

  /** A listener joins (when it starts); returns its leave (call when it closes). */
  register(listener: BudgetedListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * A connection accepted by listener `from`: true when it may stay (room; `from` holds fewer than its reserve; or
   * an idle one was closed for it — whose give() came first). false: refuse it (every held connection is busy).
   * Call give() when a connection taken here closes.
   */
  take(from?: BudgetedListener): boolean {
    const now = performance.now();
    if (now - this.readAt >= REREAD_MS || ++this.takesSinceRead >= REREAD_TAKES) {
      // No descriptor to read it with: the last value stands.
      this.limit = this.readLimit() ?? this.limit;
      this.readAt = now;
      this.takesSinceRead = 0;
    }
    // A listener's reserve: the portal's clients busy with requests cannot lock the operator or the platform out.
    if (this.held < this.max || (from !== undefined && from.held() < this.reserve) || this.shed()) {
      this.held++;
      return true;
    }
    this.refused++;
    return false;
  }

  /** A connection taken with take() closed (or was closed by shedIdle). */
  give(): void {
    if (this.held > 0) this.held--;
  }

  /** Closes the oldest idle connection of the listener holding the most that has one: the newcomer takes its place. */
  private shed(): boolean {
    const byHeld = [...this.listeners].sort((a, b) => b.held() - a.held());
    for (const l of byHeld) if (l.shedIdle()) return true;
    return false;
  }
}

/** The process's one budget (descriptors are per process). */
export const sideDescriptors = new DescriptorBudget();
