// The admission seam (src/proxy/types.ts MeterProvider): the users' rows (users.ts, written by the users
// directory) in front of accounting, both below the gateway, so admission calls nothing above it. One object
// the listeners consult once per connection, in this order — disabled, expired (the record), quota and account
// refusals (accounting), then a connection slot (maxConnections). The slot is reserved in the same synchronous
// step that admits, so the cap is exact however many clients race; it becomes the connection's at
// connectionOpened. Per chunk the relay only sees the meter (accounting) and the limiter (rate, stop on
// disable/delete).
// In a fleet maxConnections is per daemon (each daemon counts its own connections).
import type { Accounting, Admission, UserMeter } from '../accounting/accounting.ts';
import type { RelayLimiter } from './limiter.ts';
import type { UserTable } from './users.ts';

export class UserGate {
  constructor(
    private readonly users: UserTable<{ readonly name: string }>,
    private readonly accounting: Accounting,
    private readonly now: () => number = Date.now,
  ) {}

  admit(user: string): Admission {
    const now = this.now();
    const refused = this.users.refusal(user, now);
    if (refused !== undefined) return { ok: false, reason: refused };
    const a = this.accounting.admit(user);
    if (!a.ok) return a;
    const limiter = this.users.limiter(user);
    if (limiter !== undefined && !limiter.reserve(now))
      return { ok: false, reason: `user ${user} has reached its ${limiter.maxConnections} concurrent connections` };
    return a;
  }

  meter(user: string): UserMeter {
    return this.accounting.meter(user);
  }

  connectionOpened(user: string): void {
    this.accounting.connectionOpened(user);
    this.users.limiter(user)?.opened();
  }

  connectionClosed(user: string): void {
    this.accounting.connectionClosed(user);
    this.users.limiter(user)?.closed();
  }

  limiter(user: string): RelayLimiter | undefined {
    return this.users.limiter(user);
  }
}
