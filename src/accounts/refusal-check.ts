// An upstream refused the credentials of a user's drawn node (src/proxy/dial-race.ts's account refusal). A
// platform has two reasons to: the main account's traffic is spent, or the sub account those credentials
// belong to is gone (deleted behind Rotor's back, a platform reset). The balance is read again first; when
// it is not empty, the sub account itself is read, and "no such sub account" hands the user to the healer
// (src/accounts/heal.ts), which makes it again. Refused connections arrive by the hundred, so a user is
// checked at most once at a time and once per `minIntervalMs`: no connection makes a platform call.

/** What the check needs of src/accounts/balances.ts BalanceWatcher. */
export interface RefusalBalances {
  refresh(account: string, productNo: string, user?: string): Promise<{ hasBalance: boolean }>;
}

export interface AccountRefusalCheckOptions {
  balances: RefusalBalances;
  /** Reads the user's sub account (GetProxyUserInfo); rejects with the platform's error. */
  readSubAccount(user: string, productNo: string): Promise<unknown>;
  /** src/accounts/heal.ts SubAccountHealer. */
  healer: { lost(user: string, err: unknown): Promise<boolean> };
  /** Least time between two checks of one user and product; default 5 s. */
  minIntervalMs?: number;
  /** Users remembered for that interval at most (oldest forgotten first); default 10,000. */
  maxTracked?: number;
  now?: () => number;
  logger?: { warn(obj: object, msg: string): void };
}

export class AccountRefusalCheck {
  private readonly running = new Map<string, Promise<void>>();
  private readonly lastAt = new Map<string, number>();
  private readonly now: () => number;

  constructor(private readonly options: AccountRefusalCheckOptions) {
    this.now = options.now ?? Date.now;
  }

  /** A drawn node refused `user`'s account for `productNo`. Returns the check it started or joined, if any. */
  refused(user: { name: string; mainAccount: string }, productNo: string): Promise<void> | undefined {
    const key = `${user.name}\0${productNo}`;
    const running = this.running.get(key);
    if (running) return running;
    const last = this.lastAt.get(key);
    if (last !== undefined && this.now() - last < (this.options.minIntervalMs ?? 5000)) return undefined;
    this.lastAt.delete(key);
    this.lastAt.set(key, this.now());
    if (this.lastAt.size > (this.options.maxTracked ?? 10_000)) this.lastAt.delete(this.lastAt.keys().next().value!);
    const run = this.check(user, productNo)
      .catch((err: unknown) => this.options.logger?.warn({ user: user.name, productNo, err }, 'account check after a refusal failed'))
      .finally(() => this.running.delete(key));
    this.running.set(key, run);
    return run;
  }

  private async check(user: { name: string; mainAccount: string }, productNo: string): Promise<void> {
    const balance = await this.options.balances.refresh(user.mainAccount, productNo, user.name);
    // An empty balance explains the refusal: the watcher now refuses the pair's customers with the reason.
    if (!balance.hasBalance) return;
    try {
      await this.options.readSubAccount(user.name, productNo);
    } catch (err) {
      if (await this.options.healer.lost(user.name, err)) return;
      throw err;
    }
  }
}
