// Wrong-password back-off for the portal's sign-in (and its password change): after `freeFailures` wrong
// passwords for a user name (four times as many from one client address), each next try must wait, 1 s doubling up to
// `maxDelayMs`; a try during the wait is refused without checking the password (so it costs no scrypt and
// tells nothing). A right password clears the user name's count. Both tables are bounded LRUs whose entries
// outlive their longest wait.
//
// A try is reserved before its password is checked (begin), and settled after (end): the checks in flight
// count against the name and the address as failures would, so however many tries arrive at once, at most the
// free failures left are checked (one at a time once they are spent and the wait is over); the others are
// refused unchecked, like a try during the wait. Counting a failure only after its check let a burst of any size
// through the wait test before the first check ended (all checked), as the proxy's AuthGuard.enter bounds the
// checks pending per source for the same reason.
//
// The rule, by what is counted where:
// - a user name (from every address together): its checks in flight are at most its free failures left (one at
//   a time once they are spent); a try past that is refused at once, 429. One name guessed from one address or
//   from many addresses: at most the free failures checked, whatever the burst.
// - a client address (whatever the names): its checks in flight are at most its own free failures left (4 ×
//   the name's), as before; but a try past that, for a name that may still try, waits in the address's line
//   for a check in flight to end instead of being refused: a right password ends its check without spending
//   the address's count, and the next in line is checked; failures that spend it start the address's wait, and
//   everyone in line is refused with it, unchecked. So a burst of guesses over many names from one address
//   still checks at most the address's free failures, while a busy office behind one NAT signing in with right
//   passwords is delayed by a check's time, never refused. The line is bounded: LINE_PER_CLIENT tries per
//   address, LINE_TOTAL in all, each waiting at most `maxLineWaitMs`; past any bound a try is refused, 429.
//   (Counting reservations per (address, name) and only failures per address was the other way considered: a
//   burst of N names from one address would then check all N at once, the address's count learning of their
//   failures only after the checks ended.)
import { LRUCache } from 'lru-cache';

export interface BackoffOptions {
  freeFailures: number;
  maxDelayMs: number;
  /** Entries per table (user names, client addresses). */
  max?: number;
  now?: () => number;
  /** How long a try may wait in its address's line for a check in flight to end (default 10 s). */
  maxLineWaitMs?: number;
}

/** A client address's free tries, as a multiple of a user name's. */
const CLIENT_FACTOR = 4;
/** What a try refused because the free tries are all in flight is told to wait (their checks end sooner). */
const IN_FLIGHT_WAIT_MS = 1000;
/** Tries waiting in one address's line (beyond: 429 at once), and in every line together. */
const LINE_PER_CLIENT = 64;
const LINE_TOTAL = 1024;
/** begin()'s internal answer: the address's free tries left are all in flight (the try may wait in line). */
const ADDRESS_FULL = -1;

/** A try waiting in its address's line. */
interface Waiter {
  user: string;
  resolve: (waitMs: number) => void;
  timer: NodeJS.Timeout | undefined;
}

interface Count {
  failures: number;
  /** Until when tries are refused. */
  until: number;
  /** Tries reserved (begin) whose check has not ended (end). */
  inFlight: number;
}

/** How a reserved try ended: its password checked wrong or right, or not checked at all (e.g. shed as busy). */
export type TryOutcome = 'failed' | 'succeeded' | 'unchecked';

export class LoginBackoff {
  private readonly users: LRUCache<string, Count>;
  private readonly clients: LRUCache<string, Count>;
  private readonly now: () => number;
  /** Tries waiting for a check in flight from their address to end, by address, in arrival order. */
  private readonly lines = new Map<string, Waiter[]>();
  private waiting = 0;

  constructor(private readonly options: BackoffOptions) {
    this.now = options.now ?? Date.now;
    // An entry is forgotten once quiet for two of the longest waits (the count starts again).
    const ttl = Math.max(60_000, options.maxDelayMs * 2);
    this.users = new LRUCache({ max: options.max ?? 10_000, ttl, ttlAutopurge: false });
    this.clients = new LRUCache({ max: options.max ?? 10_000, ttl, ttlAutopurge: false });
  }

  /** Milliseconds before `user` may try again from `client`; 0 = now (tries in flight not counted: see begin). */
  waitMs(user: string, client: string): number {
    const t = this.now();
    const u = this.users.get(user.toLowerCase());
    const c = this.clients.get(client);
    return Math.max(0, (u?.until ?? 0) - t, (c?.until ?? 0) - t);
  }

  /**
   * Reserves a try of `user` from `client` before its password is checked: 0 = reserved (call end() once the
   * check ended, whatever its outcome), else the milliseconds to tell the client to wait (nothing reserved):
   * the name or the address is in its wait, or the name's tries left are all in flight. When the address's
   * tries left are all in flight (other names' checks) the answer is a promise: the try waits in the address's
   * line for one of them to end (see the rule at the top), then is reserved (0) or refused (> 0).
   */
  begin(user: string, client: string): number | Promise<number> {
    const line = this.lines.get(client);
    // Behind others in line: in line too (the address is full, or they would have been served).
    const r = this.reserveTry(user, client, line !== undefined);
    if (r !== ADDRESS_FULL) return r;
    if (this.waiting >= LINE_TOTAL || (line?.length ?? 0) >= LINE_PER_CLIENT) return IN_FLIGHT_WAIT_MS;
    return new Promise<number>((resolve) => {
      const w: Waiter = { user, resolve, timer: undefined };
      w.timer = setTimeout(() => this.leave(client, w), this.options.maxLineWaitMs ?? 10_000);
      if (line === undefined) this.lines.set(client, [w]);
      else line.push(w);
      this.waiting++;
    });
  }

  /** Tries waiting in the addresses' lines now. */
  get waitingInLine(): number {
    return this.waiting;
  }

  /**
   * begin()'s test and reservation: 0 reserved, > 0 refused for that long, ADDRESS_FULL the address's tries in
   * flight (or `behind` others in its line: the name is tested, nothing reserved).
   */
  private reserveTry(user: string, client: string, behind = false): number {
    const wait = this.waitMs(user, client);
    if (wait > 0) return wait;
    const uk = user.toLowerCase();
    const u = this.users.get(uk);
    const free = this.options.freeFailures;
    if (full(u, free)) return IN_FLIGHT_WAIT_MS;
    const c = this.clients.get(client);
    if (behind || full(c, free * CLIENT_FACTOR)) return ADDRESS_FULL;
    this.reserve(this.users, uk, u);
    this.reserve(this.clients, client, c);
    return 0;
  }

  /** A check from `client` ended: the tries at the head of its line are served (reserved or refused) while they can be. */
  private wake(client: string): void {
    const line = this.lines.get(client);
    if (line === undefined) return;
    while (line.length > 0) {
      const w = line[0]!;
      const r = this.reserveTry(w.user, client);
      if (r === ADDRESS_FULL) break;
      line.shift();
      this.settled(w, r);
    }
    if (line.length === 0) this.lines.delete(client);
  }

  /** A try waited its longest in line: refused unchecked. */
  private leave(client: string, w: Waiter): void {
    const line = this.lines.get(client);
    const i = line?.indexOf(w) ?? -1;
    if (i < 0) return;
    line!.splice(i, 1);
    if (line!.length === 0) this.lines.delete(client);
    this.settled(w, IN_FLIGHT_WAIT_MS);
  }

  private settled(w: Waiter, waitMs: number): void {
    clearTimeout(w.timer);
    this.waiting--;
    w.resolve(waitMs);
  }

  /** Settles a try begin() reserved. */
  end(user: string, client: string, outcome: TryOutcome): void {
    const uk = user.toLowerCase();
    const u = this.release(this.users, uk);
    const c = this.release(this.clients, client);
    if (outcome === 'failed') {
      this.bump(this.users, uk, u, this.options.freeFailures);
      // One address may be many customers behind one NAT: it gets more tries before its wait starts.
      this.bump(this.clients, client, c, this.options.freeFailures * CLIENT_FACTOR);
    } else {
      if (outcome === 'succeeded' && u !== undefined) {
        u.failures = 0;
        u.until = 0;
      }
      this.settle(this.users, uk, u);
      this.settle(this.clients, client, c);
    }
    this.wake(client);
  }

  /** A wrong password counted without a reservation (begin/end is what the routes use). */
  failed(user: string, client: string): void {
    const uk = user.toLowerCase();
    this.bump(this.users, uk, this.users.get(uk), this.options.freeFailures);
    this.bump(this.clients, client, this.clients.get(client), this.options.freeFailures * CLIENT_FACTOR);
  }

  /** A right password: the name's count starts again (its tries in flight stay counted). */
  succeeded(user: string): void {
    const uk = user.toLowerCase();
    const u = this.users.get(uk);
    if (u === undefined) return;
    u.failures = 0;
    u.until = 0;
    this.settle(this.users, uk, u);
  }

  private reserve(table: LRUCache<string, Count>, k: string, c: Count | undefined): void {
    const n = c ?? { failures: 0, until: 0, inFlight: 0 };
    n.inFlight++;
    table.set(k, n);
  }

  /** The entry with one try fewer in flight (undefined: forgotten meanwhile, by age or by the bound). */
  private release(table: LRUCache<string, Count>, k: string): Count | undefined {
    const c = table.get(k);
    if (c !== undefined && c.inFlight > 0) c.inFlight--;
    return c;
  }

  /** Keeps an entry that still counts something, drops one that counts nothing. */
  private settle(table: LRUCache<string, Count>, k: string, c: Count | undefined): void {
    if (c === undefined) return;
    if (c.failures === 0 && c.inFlight === 0 && c.until <= this.now()) table.delete(k);
    else table.set(k, c);
  }

  private bump(table: LRUCache<string, Count>, k: string, known: Count | undefined, free: number): void {
    const c = known ?? { failures: 0, until: 0, inFlight: 0 };
    c.failures++;
    const over = c.failures - free;
    if (over >= 0) c.until = this.now() + Math.min(this.options.maxDelayMs, 1000 * 2 ** Math.min(over, 30));
    table.set(k, c);
  }
}

/** The free tries left are all in flight (once spent, and the wait over, one try at a time). */
function full(c: Count | undefined, free: number): boolean {
  return c !== undefined && c.inFlight >= Math.max(1, free - c.failures);
}
