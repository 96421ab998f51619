// Wrong-password back-off for the portal's sign-in (and its password change): after `freeFailures` wrong
// passwords for a user name (four times as many from one client address), each next try must wait, 1 s doubling up to
// `maxDelayMs`; a try during the wait is refused without checking the password (so it costs no scrypt and
// tells nothing). A right password clears the user name's count. Both tables are bounded LRUs whose entries
// outlive their longest wait.
import { LRUCache } from 'lru-cache';

export interface BackoffOptions {
  freeFailures: number;
  maxDelayMs: number;
  /** Entries per table (user names, client addresses). */
  max?: number;
  now?: () => number;
}

/** A client address's free tries, as a multiple of a user name's. */
const CLIENT_FACTOR = 4;

interface Count {
  failures: number;
  /** Until when tries are refused. */
  until: number;
}

export class LoginBackoff {
  private readonly users: LRUCache<string, Count>;
  private readonly clients: LRUCache<string, Count>;
  private readonly now: () => number;

  constructor(private readonly options: BackoffOptions) {
    this.now = options.now ?? Date.now;
    // An entry is forgotten once quiet for two of the longest waits (the count starts again).
    const ttl = Math.max(60_000, options.maxDelayMs * 2);
    this.users = new LRUCache({ max: options.max ?? 10_000, ttl, ttlAutopurge: false });
    this.clients = new LRUCache({ max: options.max ?? 10_000, ttl, ttlAutopurge: false });
  }

  /** Milliseconds before `user` may try again from `client`; 0 = now. */
  waitMs(user: string, client: string): number {
    const t = this.now();
    const u = this.users.get(user.toLowerCase());
    const c = this.clients.get(client);
    return Math.max(0, (u?.until ?? 0) - t, (c?.until ?? 0) - t);
  }

  failed(user: string, client: string): void {
    this.bump(this.users, user.toLowerCase(), this.options.freeFailures);
    // One address may be many customers behind one NAT: it gets more tries before its wait starts.
    this.bump(this.clients, client, this.options.freeFailures * CLIENT_FACTOR);
  }

  succeeded(user: string): void {
    this.users.delete(user.toLowerCase());
  }

  private bump(table: LRUCache<string, Count>, k: string, free: number): void {
    const c = table.get(k) ?? { failures: 0, until: 0 };
    c.failures++;
    const over = c.failures - free;
    if (over >= 0) c.until = this.now() + Math.min(this.options.maxDelayMs, 1000 * 2 ** Math.min(over, 30));
    table.set(k, c);
  }
}
