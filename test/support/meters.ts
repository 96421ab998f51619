// An in-memory MeterProvider for gateway tests and the gateway bench (no store, no accounting): it
// counts bytes per user and, when given one, honours a per-user limit the same way accounting does
// (admission refused and running connections closed once used >= limit).
import type { Admission, MeterProvider, UserMeter } from '../../src/proxy/types.ts';

class CountingMeter implements UserMeter {
  up = 0;
  down = 0;
  active = 0;
  exhausted = false;
  constructor(public limit: number) {}
  get bounded(): boolean {
    return this.limit >= 0;
  }
  add(up: number, down: number): void {
    this.up += up;
    this.down += down;
    if (this.limit >= 0 && this.up + this.down >= this.limit) this.exhausted = true;
  }
}

export class UnlimitedMeters implements MeterProvider {
  private readonly meters = new Map<string, CountingMeter>();

  /** limits: bytes per user, both directions; absent or -1 = unlimited. */
  constructor(private readonly limits: ReadonlyMap<string, number> = new Map()) {}

  private get(user: string): CountingMeter {
    let m = this.meters.get(user);
    if (!m) {
      m = new CountingMeter(this.limits.get(user) ?? -1);
      this.meters.set(user, m);
    }
    return m;
  }

  admit(user: string): Admission {
    const m = this.get(user);
    return m.exhausted ? { ok: false, reason: `traffic limit of ${m.limit} bytes reached` } : { ok: true };
  }

  meter(user: string): UserMeter {
    return this.get(user);
  }

  connectionOpened(user: string): void {
    this.get(user).active++;
  }

  connectionClosed(user: string): void {
    this.get(user).active--;
  }

  usage(user: string): { up: number; down: number; active: number } {
    const m = this.get(user);
    return { up: m.up, down: m.down, active: m.active };
  }
}
