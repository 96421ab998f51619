// Keeps the platform's sub-account limit in step with Rotor's local limit, and Rotor's usage honest against
// the platform's, for products that support sub-account limits (`proxyUserFlowLimit` = 1).
//
// The platform takes a set-limit `limitFlow` of -1 or >= 1,024,000 bytes. Each local limit is sent as a
// looser backstop (units.platformBackstopFor: the local limit plus headroom, at least 1,024,000) and Rotor
// enforces the exact limit on its own data path. The headroom matters: the platform counts every byte
// before Rotor does, so an equal limit would always trip there first and leave the user refused upstream
// instead of by Rotor. Usage: GetProxyUserInfo `useFlow` (bytes) is compared with the local counter. What
// a customer is billed for is the bytes Rotor relayed for them: the platform counts more (bytes its exits
// read that never reached the client, traffic that bypassed Rotor), and that gap is the merchant's cost,
// shown beside the bill (GET /v1/usage?compare=platform), not the customer's. Only with
// billing.adoptPlatformUsage does Rotor adopt a higher platform figure into the meter, and in a fleet only
// the daemon holding the adoption lease does (`adopt` says whether this one may), so a gap is added once.
// Nothing here touches the data path: it runs on a timer and on limit changes.
//
// Each user is a platform call, so the timer's pass is not every user: it is the users whose usage moved
// since the last pass (accounting's change feed: the ones whose platform figure can have grown through
// Rotor) and a slice of the others in turn, so that every user is still looked at within SWEEP_PASSES passes
// (an hour at the default 60 s) — what catches a limit changed on the platform behind Rotor's back, or
// traffic that bypassed Rotor. 10,000 users, 50 of them active: about 220 calls a minute instead of 10,000.
// `start()` and `reconcile()` (a reload) still look at every user once.
import type { PlatformClient } from '../platform/client.ts';
import { PlatformError } from '../platform/errors.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Accounting, LimitChange } from './accounting.ts';
import type { ProductCatalog } from './products.ts';
import { bytesPerMb, platformBackstopFor, type FlowBase } from './units.ts';

export interface SyncedUser {
  name: string;
  /** productNo from the config ('' = the first dynamic product) */
  product: string;
}

export interface UserSyncResult {
  user: string;
  productNo: string | undefined;
  /** unsupported: the product has no sub-account limits; error: see `error` */
  outcome: 'synced' | 'unsupported' | 'no_product' | 'error';
  platformUsedBytes?: number;
  /** the set-limit limitFlow sent this time (absent when the platform already had it) */
  limitSent?: number;
  adopted?: boolean;
  error?: string;
}

export interface PlatformLimitSyncOptions {
  client: Pick<PlatformClient, 'call'>;
  accounting: Accounting;
  products: ProductCatalog;
  logger?: Logger;
  /** How often usage is reconciled and limits re-checked; default 60 s. */
  intervalMs?: number;
  /**
   * Whether this daemon adopts a higher platform usage figure into the meter now (billing.adoptPlatformUsage;
   * in a fleet, whether it holds the adoption lease). Default: never.
   */
  adopt?: () => boolean | Promise<boolean>;
}

/** A timer pass visits every idle user within this many passes ... */
const SWEEP_PASSES = 60;
/** ... and at least this many idle users per pass (small deployments: all of them, every pass). */
const SWEEP_MIN = 100;

export class PlatformLimitSync {
  private readonly client: Pick<PlatformClient, 'call'>;
  private readonly accounting: Accounting;
  private readonly products: ProductCatalog;
  private readonly logger: Logger | undefined;
  private readonly intervalMs: number;
  private readonly adopt: () => boolean | Promise<boolean>;
  private users = new Map<string, SyncedUser>();
  /** The names in turn for the idle slice, and where the next slice starts. */
  private order: string[] | undefined;
  private sweepAt = 0;
  private feed: ReturnType<Accounting['changeFeed']> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<UserSyncResult[]> | undefined;
  private readonly pending = new Set<Promise<unknown>>();
  private listening = false;
  private subscribed = false;
  private healer: { lost(user: string, err: unknown): Promise<boolean> } | undefined;
  /** The backstop this process last sent per user: a read-back within one MB of it is the platform's rounding of it. */
  private readonly sent = new Map<string, number>();

  constructor(options: PlatformLimitSyncOptions) {
    this.client = options.client;
    this.accounting = options.accounting;
    this.products = options.products;
    this.logger = options.logger;
    this.intervalMs = options.intervalMs ?? 60_000;
    this.adopt = options.adopt ?? (() => false);
  }

  /** A call answered "no such sub account" hands the user to this (src/accounts/heal.ts), then is tried again once. */
  setHealer(healer: { lost(user: string, err: unknown): Promise<boolean> }): void {
    this.healer = healer;
  }

  setUsers(users: readonly SyncedUser[]): void {
    // The callers' objects (the directory's users, replaced on change), not a copy of each: 100,000 users.
    const map = new Map<string, SyncedUser>();
    for (const u of users) map.set(u.name, u);
    this.users = map;
    for (const name of this.sent.keys()) if (!map.has(name)) this.sent.delete(name);
    // The slice goes on from about where it was (a list rebuilt after each burst of user changes must not
    // send it back to the first user every time).
    this.order = undefined;
  }

  /** Users added or changed, and users gone: O(changes), for a burst of user changes among 10,000. */
  updateUsers(changed: readonly SyncedUser[], removed: readonly string[]): void {
    for (const u of changed) {
      if (!this.users.has(u.name)) this.order?.push(u.name);
      this.users.set(u.name, u);
    }
    for (const name of removed) {
      this.users.delete(name);
      this.sent.delete(name);
    }
    // The turn's list drops the removed names when it is next needed.
    if (removed.length > 0) this.order = undefined;
  }

  /**
   * Subscribes to limit changes and reconciles on the interval (the first pass runs now, unless `firstPass`
   * is false: the daemon runs it in the background with bounded concurrency, src/users/platform-check.ts).
   */
  start(options: { firstPass?: boolean } = {}): Promise<UserSyncResult[]> {
    this.listening = true;
    if (!this.subscribed) {
      this.subscribed = true;
      this.accounting.onLimitChange((c) => this.onLimitChange(c));
    }
    // Every user is looked at by the first pass below: what changed before it is covered.
    this.feed ??= this.accounting.changeFeed();
    this.feed.take();
    if (!this.timer) {
      this.timer = setInterval(() => void this.reconcileDue(), this.intervalMs);
      this.timer.unref();
    }
    return options.firstPass === false ? Promise.resolve([]) : this.reconcile();
  }

  /** Stops the timer and waits for calls in flight. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.listening = false;
    await Promise.allSettled([...this.pending, this.running]);
  }

  /** One pass over every user: adopt higher platform usage, and correct a platform limit that drifted. */
  reconcile(): Promise<UserSyncResult[]> {
    return this.pass(() => this.users.values());
  }

  /** The timer's pass: the users whose usage moved, and the next slice of the others (see the top of the file). */
  reconcileDue(): Promise<UserSyncResult[]> {
    return this.pass(() => this.due());
  }

  private due(): SyncedUser[] {
    const picked = new Map<string, SyncedUser>();
    for (const m of this.feed?.take() ?? []) {
      const u = this.users.get(m.name);
      if (u !== undefined && m.configured) picked.set(u.name, u);
    }
    const order = (this.order ??= [...this.users.keys()]);
    const slice = Math.min(order.length, Math.max(SWEEP_MIN, Math.ceil(order.length / SWEEP_PASSES)));
    for (let i = 0; i < slice; i++) {
      if (this.sweepAt >= order.length) this.sweepAt = 0;
      const u = this.users.get(order[this.sweepAt++]!);
      if (u !== undefined) picked.set(u.name, u);
    }
    return [...picked.values()];
  }

  private pass(users: () => Iterable<SyncedUser>): Promise<UserSyncResult[]> {
    if (this.running) return this.running;
    const run = (async () => {
      const out: UserSyncResult[] = [];
      for (const u of users()) out.push(await this.syncUser(u));
      return out;
    })().finally(() => {
      this.running = undefined;
    });
    this.running = run;
    return run;
  }

  /** Reconciles one user now (also used after an admin limit change). */
  async syncUser(u: SyncedUser, healed = false): Promise<UserSyncResult> {
    let productNo: string | undefined;
    try {
      productNo = await this.products.productFor(u.product);
      if (!productNo) return { user: u.name, productNo, outcome: 'no_product' };
      const facts = await this.products.facts(productNo);
      if (!facts.dynamic || !facts.subAccountLimits) return { user: u.name, productNo, outcome: 'unsupported' };
      const info = await this.client.call('GetProxyUserInfo', { appUsername: u.name, productNo });
      const result: UserSyncResult = { user: u.name, productNo, outcome: 'synced' };
      // A per-period quota (day, week, month) is Rotor's alone: the platform counts lifetime usage, which
      // is neither comparable with the period's nor a backstop for it (so its platform limit is -1). So is the
      // quota of a user made under a name deleted before (its usage has a key of its own, Accounting usageKey):
      // the sub account's lifetime usage holds the deleted customer's too.
      const periodic = (this.accounting.periodOf(u.name) ?? 'total') !== 'total' || this.accounting.hasOwnUsageKey(u.name);
      if (!periodic && info.useFlow !== undefined && info.useFlow !== null) {
        result.platformUsedBytes = Number(info.useFlow);
        result.adopted = (await this.adopt()) ? this.accounting.adoptUsage(u.name, result.platformUsedBytes) : false;
      }
      const local = this.accounting.limitOf(u.name);
      if (local !== undefined) {
        // Looser than the local limit so Rotor, not the platform, cuts first and refuses with a reason.
        const wanted = periodic ? -1 : platformBackstopFor(local);
        // Held: the value itself, or — once Rotor sent it — the platform's whole-MB rounding of it.
        const held =
          limitHeld(info.limitFlow, wanted, facts.base) && (Number(info.limitFlow) === wanted || this.sent.get(u.name) === wanted);
        if (!held) {
          await this.client.call('SetProxyUserFlowLimit', { appUsername: u.name, productNo, limitFlow: wanted });
          this.sent.set(u.name, wanted);
          result.limitSent = wanted;
          this.logger?.info({ user: u.name, productNo, limitFlow: wanted, localLimitBytes: local }, 'platform sub-account limit set');
        }
      }
      return result;
    } catch (err) {
      if (!healed && this.healer && (await this.healer.lost(u.name, err))) return this.syncUser(u, true);
      const error = err instanceof PlatformError ? `platform error ${err.platformCode}: ${err.meaning}` : (err as Error).message;
      this.logger?.warn({ user: u.name, productNo, err }, 'sub-account limit sync failed');
      return { user: u.name, productNo, outcome: 'error', error };
    }
  }

  private onLimitChange(change: LimitChange): void {
    if (!this.listening) return;
    const u = this.users.get(change.user);
    if (!u) return;
    const p = this.syncUser(u);
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }
}

/**
 * Can the platform's read-back be the limit Rotor set? -1 (unlimited) exactly; bytes within one MB at the product's
 * base: the seed creates a sub account's limit in MB (4.13) and sets and reads it in bytes (4.18, 2.9), and a
 * platform that keeps it in whole MB reads back the bytes of the MB it kept (51,048,576 set, 50,331,648 read).
 * Setting it again would change nothing there, at every pass for every user. The sync takes it as held only once
 * it has sent that value (a limit made in MB at creation can be as close and still wants the set once). Rounded
 * either way the backstop stays looser than the local limit (its headroom is a MiB), so Rotor still cuts first.
 */
export function limitHeld(read: number | string | null | undefined, wanted: number, base: FlowBase): boolean {
  if (read === undefined || read === null || read === '') return false;
  const bytes = Number(read);
  if (!Number.isFinite(bytes)) return false;
  if (wanted < 0 || bytes < 0) return bytes === wanted;
  return Math.abs(bytes - wanted) < bytesPerMb(base);
}
