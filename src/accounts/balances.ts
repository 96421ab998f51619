// Dynamic traffic balances (ProxyInfo, MB) per (main account, product), polled on an interval and at once
// after a draw error that smells of balance. When a balance runs out Rotor says so once in the log, stops
// drawing for that pair (`canDraw` false) and — unless told otherwise — refuses the users who draw from it
// with that reason (Accounting admission) instead of letting them hang on dead upstreams; when the balance
// comes back (a new dynamic order credits flow), draws and users resume and the log says so once.
// For products sold by IP count the balance is the IPs left (ipTotal - ipUsed); the gauge still shows the
// platform's MB figure.
import type { PlatformClient } from '../platform/client.ts';
import { PlatformError } from '../platform/errors.ts';
import { balanceEntry } from '../platform/balance-entry.ts';
import { CODE } from '../platform/codes.ts';
import type { Accounting } from '../accounting/accounting.ts';
import type { ProductCatalog } from '../accounting/products.ts';
import { mbToBytes } from '../accounting/units.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Logger } from '../telemetry/logger.ts';

export interface Balance {
  account: string;
  productNo: string;
  proxyType: number;
  /** ProxyInfo `balance`, MB */
  balanceMb: number;
  /** the same in bytes at the product's base, rounded down */
  balanceBytes: number;
  usedMb: number | undefined;
  totalMb: number | undefined;
  ipUsed: number | undefined;
  ipTotal: number | undefined;
  whitelist: string[];
  /** traffic (or IPs) left */
  hasBalance: boolean;
  /** epoch ms */
  checkedAt: number;
}

export interface BalanceUser {
  name: string;
  mainAccount: string;
  product: string;
}

export interface BalanceWatcherOptions {
  client: Pick<PlatformClient, 'call'>;
  products: ProductCatalog;
  metrics?: Metrics;
  logger?: Logger;
  /** Refuse users of an empty (account, product) through its admission; default true when given. */
  accounting?: Accounting;
  refuseWhenEmpty?: boolean;
  /** default 60 s */
  intervalMs?: number;
  now?: () => number;
}

/** The cause under which balance refusals are registered with Accounting. */
export const BALANCE_REFUSAL = 'balance';

/** Platform codes that say "no traffic/money left". */
const BALANCE_CODES: number[] = [CODE.CREATE_BALANCE, CODE.RENEW_BALANCE, CODE.ALLOCATE_BALANCE, CODE.RETURN_BALANCE];

/** Does this error (from a draw or an extraction link) suggest the balance ran out? */
export function smellsOfBalance(err: unknown): boolean {
  if (err instanceof PlatformError) return BALANCE_CODES.includes(err.platformCode);
  const e = err as { platformCode?: unknown; message?: unknown } | null;
  if (e && typeof e.platformCode === 'number' && BALANCE_CODES.includes(e.platformCode)) return true;
  return typeof e?.message === 'string' && /balance|insufficient|exhausted|not enough/i.test(e.message);
}

const key = (account: string, productNo: string) => `${account}\n${productNo}`;

const NO_USERS: readonly BalanceUser[] = [];

export class BalanceWatcher {
  private readonly client: Pick<PlatformClient, 'call'>;
  private readonly products: ProductCatalog;
  private readonly metrics: Metrics | undefined;
  private readonly logger: Logger | undefined;
  private readonly accounting: Accounting | undefined;
  private readonly refuseWhenEmpty: boolean;
  private readonly intervalMs: number;
  private readonly now: () => number;
  /** Every user watched, as the caller lists them now (a list, or how to list them: read at each poll). */
  private listUsers: () => readonly BalanceUser[] = () => NO_USERS;
  private readonly balances = new Map<string, Balance>();
  /** users currently refused for an empty balance */
  private readonly refused = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<Balance[]> | undefined;
  private readonly listeners: Array<(b: Balance) => void> = [];
  private again = false;
  /** Reads of pairs never read before, by pair (one platform call however many draws wait on it). */
  private readonly firstReads = new Map<string, Promise<void>>();

  constructor(options: BalanceWatcherOptions) {
    this.client = options.client;
    this.products = options.products;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.accounting = options.accounting;
    this.refuseWhenEmpty = options.refuseWhenEmpty ?? true;
    this.intervalMs = options.intervalMs ?? 60_000;
    this.now = options.now ?? Date.now;
  }

  /**
   * The users whose (main account, product) pairs are watched: at start, on reload, and after a burst of user
   * changes, which names the users it `changed` (only their pairs can be new; absent: any user's can be).
   */
  setUsers(users: readonly BalanceUser[] | (() => readonly BalanceUser[]), changed?: readonly BalanceUser[]): void {
    // The callers' objects (the directory's LocalUsers, replaced on change), not a copy of 100,000 of them; or how
    // to list them when a poll needs them (a burst of changes then lists nobody: 35 ms per burst at 100,000).
    if (typeof users === 'function') this.listUsers = users;
    else this.listUsers = () => users;
    // A user made since the last poll (POST /v1/users) on an account never read: read it now, not at the next
    // poll, so its customer is refused with the reason before a draw meets the platform's refusal. A burst
    // walks its own users only: an import of 100,000 in bursts of 1,000 walked every user each time.
    if (this.timer) void this.readNewPairs(changed ?? this.listUsers());
  }

  private async readNewPairs(users: readonly BalanceUser[]): Promise<void> {
    // Once per (account, product) named: 100,000 users on a few accounts are a few reads, not 100,000 awaits
    // per change burst (refresh() refuses every user of the pair).
    const seen = new Set<string>();
    for (const u of users) {
      const named = key(u.mainAccount, u.product);
      if (seen.has(named)) continue;
      seen.add(named);
      const productNo = await this.dynamicProductOf(u);
      if (productNo !== undefined && !this.balances.has(key(u.mainAccount, productNo))) await this.known(u.mainAccount, productNo, u.name);
    }
  }

  /** The user's dynamic product number; undefined for a static or unknown one. */
  private async dynamicProductOf(u: BalanceUser): Promise<string | undefined> {
    try {
      const productNo = await this.products.productFor(u.product);
      return productNo && (await this.products.facts(productNo)).dynamic ? productNo : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * A pair's balance read once if it never was (src/accounts/draw-guard.ts, before a first draw): `user` and
   * the watched users of the pair are refused at once when it is empty. A failed read leaves the draw to the
   * platform's answer.
   */
  known(account: string, productNo: string, user?: string): Promise<void> {
    const k = key(account, productNo);
    if (this.balances.has(k)) return Promise.resolve();
    let read = this.firstReads.get(k);
    if (read === undefined) {
      read = this.refresh(account, productNo, user)
        .then(() => undefined)
        .catch((err: unknown) => this.logger?.warn({ account, productNo, err }, 'balance read before a first draw failed'))
        .finally(() => this.firstReads.delete(k));
      this.firstReads.set(k, read);
    }
    return read;
  }

  /**
   * Reads one pair now and refuses (or lets through again) its watched users and `user`: after an order for
   * the pair became final, or the upstream refused the account. Resolves with the balance read.
   */
  async refresh(account: string, productNo: string, user?: string): Promise<Balance> {
    const b = await this.fetch(account, productNo);
    const users = new Set<string>();
    if (user !== undefined) users.add(user);
    // One product lookup per product named, not one await per user.
    const dynamic = new Map<string, string | undefined>();
    for (const u of this.listUsers()) {
      if (u.mainAccount !== account) continue;
      if (!dynamic.has(u.product)) dynamic.set(u.product, await this.dynamicProductOf(u));
      if (dynamic.get(u.product) === productNo) users.add(u.name);
    }
    this.applyRefusals([...users], b);
    return b;
  }

  /**
   * An order became final (callback or tracker): each dynamic product it credited to a main account has
   * that balance read at once, so its customers are served (or refused) without waiting for the next poll.
   */
  async orderFinal(request: unknown): Promise<void> {
    const params = (request as { params?: unknown } | null)?.params;
    if (!Array.isArray(params)) return;
    const pairs = new Map<string, { account: string; productNo: string }>();
    for (const p of params as Array<{ appUsername?: unknown; productNo?: unknown }>) {
      if (typeof p?.appUsername !== 'string' || p.appUsername === '' || typeof p.productNo !== 'string') continue;
      pairs.set(key(p.appUsername, p.productNo), { account: p.appUsername, productNo: p.productNo });
    }
    for (const { account, productNo } of pairs.values()) {
      try {
        if (!(await this.products.facts(productNo)).dynamic) continue;
        const b = await this.refresh(account, productNo);
        this.logger?.info({ account, productNo, balanceMb: b.balanceMb }, 'balance read after an order became final');
      } catch (err) {
        this.logger?.warn({ account, productNo, err }, 'balance read after an order became final failed; the next poll reads it');
      }
    }
  }

  /** Polls now, then every interval. */
  start(): Promise<Balance[]> {
    if (!this.timer) {
      this.timer = setInterval(() => void this.poll(), this.intervalMs);
      this.timer.unref();
    }
    return this.poll();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.polling?.catch(() => undefined);
  }

  /**
   * Polls every watched pair. A poll asked for while one runs starts again right after it (so a nudge after
   * a draw error always sees a fresh answer), and both callers get that later result.
   */
  poll(): Promise<Balance[]> {
    if (this.polling) {
      this.again = true;
      return this.polling;
    }
    const run = this.pollOnce().finally(() => {
      this.polling = undefined;
      if (this.again) {
        this.again = false;
        void this.poll();
      }
    });
    this.polling = run;
    return run;
  }

  /** Polls now (after a draw error that smells of balance, or after a dynamic order / traffic return). */
  nudge(): Promise<Balance[]> {
    return this.poll();
  }

  /** For drawers: call after a failed draw; polls at once when the error smells of balance. */
  drawFailed(err: unknown): void {
    if (smellsOfBalance(err)) void this.nudge();
  }

  /** Called with every balance read (the balance.low event, src/events/balance-low.ts). */
  onBalance(listener: (b: Balance) => void): void {
    this.listeners.push(listener);
  }

  /** The last known balance of a pair. */
  get(account: string, productNo: string): Balance | undefined {
    return this.balances.get(key(account, productNo));
  }

  list(): Balance[] {
    return [...this.balances.values()];
  }

  /** True when the last poll found traffic (or IPs) left; false when empty; true when never polled. */
  hasBalance(account: string, productNo: string): boolean {
    return this.balances.get(key(account, productNo))?.hasBalance ?? true;
  }

  /** Should a drawer draw for this pair now? (Unknown pairs may: the platform has the last word.) */
  canDraw(account: string, productNo: string): boolean {
    return this.hasBalance(account, productNo);
  }

  /** One ProxyInfo read (also GET /v1/accounts/:name/balance); updates the gauge and the state. */
  async fetch(account: string, productNo: string): Promise<Balance> {
    const facts = await this.products.facts(productNo);
    const info = await this.client.call('ProxyInfo', { appUsername: account, proxyType: facts.proxyType as 104 | 105, productNo });
    // This product's entry (or a lone one naming none), never another product's balance.
    const entry = balanceEntry(info.list, productNo);
    const balanceMb = Number(entry?.balance ?? 0);
    const ipTotal = entry?.ipTotal ?? undefined;
    const ipUsed = entry?.ipUsed ?? undefined;
    const hasBalance = facts.byIpCount ? (ipTotal ?? 0) - (ipUsed ?? 0) > 0 : balanceMb > 0;
    const balance: Balance = {
      account,
      productNo,
      proxyType: facts.proxyType,
      balanceMb,
      balanceBytes: Math.max(0, mbToBytes(balanceMb, facts.base)),
      usedMb: entry?.used ?? undefined,
      totalMb: entry?.total ?? undefined,
      ipUsed,
      ipTotal,
      whitelist: entry?.ipWhiteList ?? [],
      hasBalance,
      checkedAt: this.now(),
    };
    this.record(balance);
    return balance;
  }

  private async pollOnce(): Promise<Balance[]> {
    // The users grouped by (main account, product) first, with no await per user: each pair's product is
    // looked up once (100,000 users on a few accounts were 200,000 awaits and as many strings a poll).
    const named = new Map<string, Map<string, string[]>>();
    for (const u of this.listUsers()) {
      let byProduct = named.get(u.mainAccount);
      if (byProduct === undefined) named.set(u.mainAccount, (byProduct = new Map()));
      let names = byProduct.get(u.product);
      if (names === undefined) byProduct.set(u.product, (names = []));
      names.push(u.name);
    }
    const pairs = new Map<string, { account: string; productNo: string; users: string[] }>();
    for (const [account, byProduct] of named) {
      for (const [product, names] of byProduct) {
        let productNo: string | undefined;
        try {
          productNo = await this.products.productFor(product);
          if (!productNo || !(await this.products.facts(productNo)).dynamic) continue;
        } catch (err) {
          this.logger?.warn({ account, product, users: names.length, err }, 'balance poll: product unknown');
          continue;
        }
        const k = key(account, productNo);
        const pair = pairs.get(k);
        if (pair === undefined) pairs.set(k, { account, productNo, users: names });
        else for (const n of names) pair.users.push(n);
      }
    }
    const out: Balance[] = [];
    for (const pair of pairs.values()) {
      try {
        const b = await this.fetch(pair.account, pair.productNo);
        out.push(b);
        this.applyRefusals(pair.users, b);
      } catch (err) {
        this.logger?.warn({ account: pair.account, productNo: pair.productNo, err }, 'balance poll failed');
      }
    }
    // Users no longer watched, or whose pair has balance again, are not refused for balance.
    if (this.refused.size === 0) return out;
    const watched = new Set<string>();
    for (const p of pairs.values()) for (const n of p.users) watched.add(n);
    for (const user of [...this.refused]) {
      if (!watched.has(user)) {
        this.refused.delete(user);
        this.accounting?.setRefusal(user, BALANCE_REFUSAL, null);
      }
    }
    return out;
  }

  private record(b: Balance): void {
    const k = key(b.account, b.productNo);
    const before = this.balances.get(k);
    this.balances.set(k, b);
    this.metrics?.flowBalance.set({ account: b.account, product: b.productNo }, b.balanceBytes);
    for (const listener of this.listeners) listener(b);
    if (before?.hasBalance !== false && !b.hasBalance) {
      this.logger?.warn(
        { account: b.account, productNo: b.productNo },
        `traffic balance of main account ${b.account} for product ${b.productNo} is exhausted; draws stop until it is topped up`,
      );
    } else if (before?.hasBalance === false && b.hasBalance) {
      this.logger?.info(
        { account: b.account, productNo: b.productNo, balanceMb: b.balanceMb },
        `traffic balance of main account ${b.account} for product ${b.productNo} is back; draws resume`,
      );
    }
  }

  private applyRefusals(users: string[], b: Balance): void {
    if (!this.accounting || !this.refuseWhenEmpty) return;
    const reason = b.hasBalance ? null : `traffic balance of main account ${b.account} for product ${b.productNo} is exhausted`;
    for (const user of users) {
      this.accounting.setRefusal(user, BALANCE_REFUSAL, reason);
      if (reason) this.refused.add(user);
      else this.refused.delete(user);
    }
  }
}
