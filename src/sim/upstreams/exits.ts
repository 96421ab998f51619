// Which loopback source address carries a connection: rotating per connection, sticky per session for its
// sessTime from first use, or fixed per static instance.
import { UpstreamError } from './errors.ts';

interface StickyExit {
  address: string;
  expiresAt: number;
}

/** Expired sessions are swept when this many have been opened since the last sweep. */
const SWEEP_EVERY = 1024;

export class Exits {
  private next = 0;
  private readonly sessions = new Map<string, StickyExit>();
  private openedSinceSweep = 0;

  constructor(
    readonly addresses: readonly string[],
    private readonly now: () => number,
  ) {}

  /** A different exit on every call (round robin). */
  rotate(): string {
    const address = this.addresses[this.next % this.addresses.length]!;
    this.next = (this.next + 1) % this.addresses.length;
    return address;
  }

  /** The session's exit; a session keeps it for `minutes` from first use, then moves to another one. */
  sticky(sessionKey: string, minutes: number): string {
    const now = this.now();
    const held = this.sessions.get(sessionKey);
    if (held && held.expiresAt > now) return held.address;
    let address = this.rotate();
    if (held && address === held.address && this.addresses.length > 1) address = this.rotate();
    this.sessions.set(sessionKey, { address, expiresAt: now + minutes * 60_000 });
    if (++this.openedSinceSweep >= SWEEP_EVERY) this.sweep(now);
    return address;
  }

  /** The same exit for the same key, spread over the exits (FNV-1a). */
  fixed(key: string): string {
    let hash = 0x811c9dc5;
    for (let i = 0; i < key.length; i++) {
      hash ^= key.charCodeAt(i);
      hash = Math.imul(hash, 0x01000193);
    }
    return this.addresses[(hash >>> 0) % this.addresses.length]!;
  }

  private sweep(now: number): void {
    this.openedSinceSweep = 0;
    for (const [key, held] of this.sessions) if (held.expiresAt <= now) this.sessions.delete(key);
  }
}

/** 127.0.0.2 .. 127.0.0.(1+n). */
export function exitAddresses(count: number): string[] {
  if (!Number.isInteger(count) || count < 1 || count > 253) throw new UpstreamError('UPSTREAM_BAD_OPTIONS', 'exits must be 1..253');
  return Array.from({ length: count }, (_, i) => `127.0.0.${2 + i}`);
}
