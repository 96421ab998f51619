// A user's traffic limit enforced across the fleet without Redis on the data path. Each daemon leases a
// slice of the user's remaining allowance from Redis, spends it locally (a sync subtraction per chunk) and
// asks for more when it runs low; what it spent moves from its lease to the user's `used` counter in the
// same Lua script that grants the next slice, so `used + Σ leases ≤ limit` holds in Redis at every moment.
//
// Overshoot bound (how far the fleet's total can pass the limit):
//   • Redis reachable by every daemon: none beyond the chunks in flight. A daemon stops a user when its
//     lease is spent, and leases never sum above what is left. In-flight: each connection may relay the
//     one chunk that crosses zero (≤ chunk size × the user's open connections on that daemon).
//   • A daemon that cannot reach Redis for longer than `aliveTtlMs` (dead, partitioned, or Redis itself
//     down) has its lease handed back to the others (its heartbeat key expired) while it may still be
//     spending it: ≤ sliceBytes per such daemon. It may then spend `offlineBytes` more on its own (the
//     "keep serving with local limits" allowance; default one slice) and refuses the user after that until
//     Redis is back.
//   • While a refill is in flight, and only when the previous sync granted the whole lease asked for (the
//     fleet was not near the limit), a daemon lets the user overdraw its lease by up to lowWaterBytes (half
//     a slice by default), so a fast user is not cut for one Redis round trip; the refill reports the
//     overdraft as used. Other daemons spending the last of the allowance in that round trip is the only
//     way this passes the limit with Redis reachable: ≤ lowWaterBytes per daemon.
//   So with N daemons: total ≤ limit + N × (sliceBytes + lowWaterBytes + offlineBytes) + in-flight chunks in
//   the worst case (an outage); limit + N × lowWaterBytes + in-flight chunks while Redis is reachable. When Redis comes back, each daemon's next sync
//   moves everything it spent (offline included) into `used`: the books are exact afterwards, only the
//   enforcement was approximate.
//
// Choose sliceBytes ≥ 2 × (one user's peak rate through one daemon) × (Redis round trip + scheduling),
// so a refill (started at half a slice) lands before the slice is spent; 1 MiB is plenty on a LAN.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { AllowanceSource, FleetAllowance } from '../accounting/accounting.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Store } from '../store/types.ts';
import type { RedisConnection } from '../store/redis-connection.ts';
import { DEFAULT_REDIS_PREFIX, RedisKeys } from '../store/redis-keys.ts';
import { callScript, defineScripts } from '../store/redis.ts';
import { InternalError } from '../errors/rotor-error.ts';

// KEYS: usage hash (used, limit), allowance hash (instance -> leased), usage:all set, acked hash (reporter ->
// cumulative bytes applied).
// ARGV: instance, user, reported (cumulative bytes this reporter has spent, adopted usage included), want
// (lease to hold after: top up to it, or give back down to it), alive key prefix, alive ttl ms, now, seed
// limit ('' = none), seed used, reporter (instance:epoch), acked (the cumulative figure this reporter last
// saw applied), final ('1': the reporter's last sync, forget it), acked ttl ms.
// Returns {held, granted, limit, used, seeded}; granted -1 and held 0 for an unlimited user. `seeded` 1:
// the usage hash was missing (Redis came back empty) and was rebuilt from this daemon's last view.
//
// Spending is reported as a cumulative figure, not a delta, so a sync is idempotent: a script that ran but
// whose reply was lost (a command timeout while Redis was stalled, a dropped connection) is followed by one
// reporting a cumulative figure that includes the same bytes, and only what lies beyond the figure already
// applied is added. Reporting deltas, the retry added them a second time (a billing double count).
const SYNC = `
local inst, want = ARGV[1], tonumber(ARGV[4])
local seeded = 0
if ARGV[8] ~= '' and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'limit', ARGV[8], 'used', ARGV[9], 'updatedAt', ARGV[7])
  redis.call('SADD', KEYS[3], ARGV[2])
  seeded = 1
end
local base = tonumber(redis.call('HGET', KEYS[4], ARGV[10]) or ARGV[11])
local spent = tonumber(ARGV[3]) - base
if spent < 0 then spent = 0 end
if ARGV[12] == '1' then redis.call('HDEL', KEYS[4], ARGV[10])
elseif spent > 0 or redis.call('HEXISTS', KEYS[4], ARGV[10]) == 0 then
  redis.call('HSET', KEYS[4], ARGV[10], ARGV[3])
  redis.call('PEXPIRE', KEYS[4], ARGV[13])
end
redis.call('SET', ARGV[5] .. inst, '1', 'PX', ARGV[6])
local mine = tonumber(redis.call('HGET', KEYS[2], inst) or '0')
if spent > 0 then
  redis.call('HINCRBY', KEYS[1], 'used', spent)
  redis.call('HSETNX', KEYS[1], 'limit', -1)
  redis.call('HSET', KEYS[1], 'updatedAt', ARGV[7])
  redis.call('SADD', KEYS[3], ARGV[2])
  mine = mine - math.min(spent, mine)
end
local others = 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  if all[i] ~= inst then
    if redis.call('EXISTS', ARGV[5] .. all[i]) == 0 then redis.call('HDEL', KEYS[2], all[i])
    else others = others + tonumber(all[i + 1]) end
  end
end
local limit = tonumber(redis.call('HGET', KEYS[1], 'limit') or '-1')
local used = tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
local granted = 0
if limit < 0 then
  mine = 0
  granted = -1
elseif want <= mine then
  mine = want
else
  local left = limit - used - others - mine
  if left > 0 then granted = math.min(want - mine, left) end
  mine = mine + granted
end
if mine > 0 then redis.call('HSET', KEYS[2], inst, mine) else redis.call('HDEL', KEYS[2], inst) end
return {mine, granted, limit, used, seeded}
`;
const SCRIPTS = { rotorAllowanceSync: { numberOfKeys: 4, lua: SYNC } };
/** How long a reporter's applied figure outlives its last sync (a crashed daemon never says `final`). */
const ACKED_TTL_MS = 7 * 86_400_000;

export interface AllowanceOptions {
  /** This daemon's identity, unique in the fleet. */
  instance: string;
  /** Most bytes of one user's allowance a daemon holds at a time. */
  sliceBytes: number;
  /** Refill when what is left of the lease falls to this; default sliceBytes / 2. */
  lowWaterBytes?: number;
  /** Bytes a daemon may spend per user on its own while Redis is unreachable; default sliceBytes. */
  offlineBytes?: number;
  /** The heartbeat's TTL: leases of a daemon silent this long go back to the fleet. Default 10 000 ms. */
  aliveTtlMs?: number;
  /** How often every user is synced (spent reported, exhausted users retried, heartbeat); default aliveTtlMs / 3. */
  syncEveryMs?: number;
  prefix?: string;
  /** Distinguishes this process's reports from an earlier run's with the same instance id; default random. */
  epoch?: string;
  now?: () => number;
  logger?: Logger;
  /** Called when a user's allowance changes from exhausted to available or back (off the data path). */
  onChange?: (user: string, exhausted: boolean) => void;
}

/** One user's allowance on this daemon: the data path's handle. `spend` is sync and allocates nothing. */
export class UserAllowance implements FleetAllowance {
  /** Lease held as of the last sync (bytes), plus any offline allowance taken since. */
  held = 0;
  /** Spent since the last sync. */
  spent = 0;
  /** Cumulative bytes (spent and extra) Redis confirmed applying from this reporter (see SYNC). */
  acked = 0;
  unlimited = false;
  /** Redis could not be reached at the last attempt. */
  offline = false;
  /** Bytes spent by traffic since the accounting layer last flushed (to find its non-traffic deltas). */
  unflushed = 0;
  /** Non-traffic usage to move into `used` at the next sync (e.g. the platform counted more). */
  extra = 0;
  /** Whether this user's offline allowance was taken in the current outage. */
  offlineTaken = false;
  syncing: Promise<void> | undefined;
  /** Last exhausted state told to onChange. */
  wasExhausted = true;
  /** The last sync granted the whole lease it asked for: the fleet is not near this user's limit. */
  roomy = false;
  /** No data-path refill before this (epoch ms): after a failed sync or one that granted nothing. */
  quietUntil = 0;
  /**
   * The user's limit and fleet usage as this daemon last saw them (kept by the accounting layer): when a
   * sync finds Redis without the user's usage (it restarted empty), it rebuilds it from these instead of
   * letting the user run unlimited. null: nothing to rebuild from.
   */
  seedLimit: number | null = null;
  seedUsed = 0;

  constructor(
    readonly user: string,
    private readonly lowWater: number,
    private readonly refill: (a: UserAllowance) => void,
  ) {}

  /** Bytes this daemon may still relay for the user without asking Redis (Infinity when unlimited). */
  get available(): number {
    return this.unlimited ? Infinity : this.held - this.spent;
  }

  /**
   * While a refill is on its way the user may run up to `lowWater` past the lease (the overdraft), so a fast
   * connection is not cut for the length of one Redis round trip; the refill then reports the overdraft
   * as used. Only while the fleet has room (the last sync granted all it was asked): near the limit, or
   * with no refill in flight, the lease is the limit.
   */
  get exhausted(): boolean {
    return !this.unlimited && this.held - this.spent <= this.floor();
  }

  /** How far below zero the lease may go now: the overdraft while a refill is on its way (see above). */
  private floor(): number {
    return this.syncing !== undefined && this.roomy ? -this.lowWater : 0;
  }

  /** Counts relayed bytes; returns false once the allowance is spent (the caller stops the user). */
  spend(bytes: number): boolean {
    this.spent += bytes;
    this.unflushed += bytes;
    if (this.unlimited) return true;
    const left = this.held - this.spent;
    if (left <= this.lowWater && this.syncing === undefined) this.refill(this);
    return left > this.floor();
  }
}

export class AllowanceLeaser implements AllowanceSource {
  readonly instance: string;
  /** This process's reporter id in the acked hash: the instance id may be reused by the next run. */
  private readonly reporter: string;
  private readonly keys: RedisKeys;
  private readonly slice: number;
  private readonly lowWater: number;
  private readonly offlineBytes: number;
  private readonly aliveTtlMs: number;
  private readonly now: () => number;
  private readonly logger: Logger | undefined;
  private readonly onChange: AllowanceOptions['onChange'];
  private readonly users = new Map<string, UserAllowance>();
  private readonly timer: NodeJS.Timeout;
  private readonly syncEveryMs: number;
  private readonly refill = (a: UserAllowance): void => {
    if (this.now() < a.quietUntil) return;
    void this.sync(a, this.slice);
  };
  private closed = false;
  /** Redis could not be reached in the last round: the next one syncs every user (see syncAll). */
  private everyoneNext = false;

  constructor(
    private readonly connection: RedisConnection,
    options: AllowanceOptions,
  ) {
    if (!(options.sliceBytes > 0)) throw new InternalError('sliceBytes must be positive');
    this.instance = options.instance;
    this.reporter = `${options.instance}:${options.epoch ?? randomBytes(6).toString('hex')}`;
    this.keys = new RedisKeys(options.prefix ?? DEFAULT_REDIS_PREFIX);
    this.slice = Math.floor(options.sliceBytes);
    this.lowWater = options.lowWaterBytes ?? Math.floor(this.slice / 2);
    this.offlineBytes = options.offlineBytes ?? this.slice;
    this.aliveTtlMs = options.aliveTtlMs ?? 10_000;
    this.now = options.now ?? Date.now;
    this.logger = options.logger;
    this.onChange = options.onChange;
    defineScripts(connection.client, SCRIPTS);
    this.syncEveryMs = options.syncEveryMs ?? Math.max(10, Math.floor(this.aliveTtlMs / 3));
    this.timer = setInterval(() => void this.syncAll(), this.syncEveryMs);
    this.timer.unref();
  }

  /** The data path's handle for a user (the same object every time). */
  user(name: string): UserAllowance {
    let a = this.users.get(name);
    if (a === undefined) {
      a = new UserAllowance(name, this.lowWater, this.refill);
      this.users.set(name, a);
    }
    return a;
  }

  /**
   * Tops the user's lease up to one slice (reporting what was spent); resolves to the bytes this daemon may
   * now spend (Infinity: unlimited; 0: the fleet's allowance is used up). Never rejects: when Redis is
   * unreachable the offline allowance applies.
   */
  async acquire(user: string): Promise<number> {
    const a = this.user(user);
    await this.sync(a, this.slice);
    return a.available;
  }

  /**
   * Usage that did not go through `spend` (e.g. adopted from the platform): moved into `used` at the next
   * sync, which this starts and awaits.
   */
  async report(user: string, usedBytes: number): Promise<void> {
    const a = this.user(user);
    if (usedBytes > 0) a.extra += Math.trunc(usedBytes);
    await this.sync(a, this.slice);
  }

  /** Reports what was spent and gives the unspent lease back to the fleet. */
  async release(user: string): Promise<void> {
    const a = this.users.get(user);
    if (a) await this.sync(a, 0);
  }

  /**
   * The timer's round (every syncEveryMs): syncs the users that need Redis — spending or extra usage to
   * report, a lease run low or out (retried: the fleet may have room again), offline — not every user: an
   * idle user holding its lease needs nothing but the heartbeat that keeps this daemon's leases its own, and
   * one script call (or a bare heartbeat when nobody is due) renews that for all. 10,000 users, a few
   * active: a few calls per round instead of 10,000. After a round in which Redis could not be reached the
   * next one syncs every user, so a Redis that came back empty has every user's usage and limit rebuilt.
   */
  async syncAll(): Promise<void> {
    const everyone = this.everyoneNext;
    const due: UserAllowance[] = [];
    for (const a of this.users.values()) {
      if (everyone || a.offline || a.spent > 0 || a.extra > 0 || a.exhausted || a.available <= this.lowWater) due.push(a);
    }
    let reached = true;
    const heartbeat = async (): Promise<void> => {
      try {
        await this.connection.run('allowance heartbeat', (c: Redis) =>
          c.set(this.keys.aliveBase + this.instance, '1', 'PX', this.aliveTtlMs),
        );
      } catch {
        reached = false; // the connection logged it
      }
    };
    await Promise.all([
      ...due.map((a) => this.sync(a, a.exhausted || a.available <= this.lowWater ? this.slice : Math.max(0, a.held - a.spent))),
      ...(due.length === 0 && this.users.size > 0 ? [heartbeat()] : []),
    ]);
    this.everyoneNext = !reached || due.some((a) => a.offline);
  }

  /**
   * A UsageStore for the accounting layer in fleet mode: its flush no longer adds traffic to `used` (each
   * sync does), only what it counted beyond the bytes that went through `spend` (adopted usage).
   */
  usageStore<S extends Pick<Store, 'addUsage'>>(store: S): S {
    const addUsage = async (deltas: { user: string; bytes: number }[]): Promise<void> => {
      const waits: Promise<void>[] = [];
      for (const d of deltas) {
        const a = this.user(d.user);
        const beyond = d.bytes - a.unflushed;
        a.unflushed = 0;
        if (beyond > 0) waits.push(this.report(d.user, beyond));
      }
      await Promise.all(waits);
    };
    return new Proxy(store, { get: (target, prop, receiver) => (prop === 'addUsage' ? addUsage : Reflect.get(target, prop, receiver)) });
  }

  /** Stops the timer and gives every unspent lease back (best effort when Redis is down). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await Promise.all([...this.users.values()].map((a) => this.sync(a, 0, true)));
  }

  private sync(a: UserAllowance, want: number, final = false): Promise<void> {
    if (a.syncing) return a.syncing.then(() => this.sync(a, want, final));
    const run = this.syncOnce(a, want, final).finally(() => {
      a.syncing = undefined;
    });
    a.syncing = run;
    return run;
  }

  private async syncOnce(a: UserAllowance, want: number, final: boolean): Promise<void> {
    const spent = a.spent;
    const extra = a.extra;
    // Not yet confirmed: everything since the last confirmed sync, a failed one's bytes included.
    const cumulative = a.acked + Math.max(0, Math.trunc(spent)) + extra;
    let r: [number, number, number, number, number];
    try {
      r = (await this.connection.run(`allowance of ${a.user}`, (c: Redis) =>
        callScript(c, 'rotorAllowanceSync', [
          this.keys.usage(a.user),
          this.keys.allowance(a.user),
          this.keys.usageAll,
          this.keys.allowanceAcked(a.user),
          this.instance,
          a.user,
          cumulative,
          Math.max(0, Math.floor(want)),
          this.keys.aliveBase,
          this.aliveTtlMs,
          this.now(),
          a.seedLimit === null ? '' : Math.trunc(a.seedLimit),
          Math.max(0, Math.trunc(a.seedUsed)),
          this.reporter,
          a.acked,
          final ? '1' : '0',
          ACKED_TTL_MS,
        ]),
      )) as [number, number, number, number, number];
    } catch {
      // Unreachable (the connection logged it): serve on the offline allowance, once per user per outage.
      if (!a.offline)
        this.logger?.warn(
          { user: a.user, offlineBytes: this.offlineBytes },
          'allowance: redis unreachable; serving this user on the offline allowance',
        );
      a.offline = true;
      a.quietUntil = this.now() + this.syncEveryMs;
      if (!a.offlineTaken && !a.unlimited) {
        a.offlineTaken = true;
        a.held += this.offlineBytes;
      }
      this.tell(a);
      return;
    }
    if (r[4] === 1)
      this.logger?.warn(
        { user: a.user, limitBytes: a.seedLimit, usedBytes: a.seedUsed },
        "allowance: redis had lost this user's usage (restarted empty?); rebuilt it from this instance's last view",
      );
    // Bytes spent while the script ran stay in `spent`, to be reported next time.
    a.acked = cumulative;
    a.spent -= spent;
    a.extra -= extra;
    a.unlimited = r[1] === -1;
    a.held = r[0];
    a.roomy = want > 0 && r[0] >= want;
    a.offline = false;
    a.offlineTaken = false;
    a.quietUntil = r[1] === 0 && want > r[0] ? this.now() + this.syncEveryMs : 0;
    this.tell(a);
  }

  private tell(a: UserAllowance): void {
    const exhausted = a.exhausted;
    if (exhausted !== a.wasExhausted) {
      a.wasExhausted = exhausted;
      this.onChange?.(a.user, exhausted);
    }
  }
}
