// A user's platform side: its sub account (CreateProxyUser, appUsername = the user's name) under its main
// account, and the platform-side limit (SetProxyUserFlowLimit). Every step reads before it writes, so running
// it again — after a crash between the platform call and the store write, or by another daemon — ends in the
// same state: that is what makes the creation journal (src/users/directory.ts) safe to resume.
// A missing main account is created too (CreateUser only after ProxyInfo said 10052: CreateUser "creates or
// modifies", so calling it on an existing account would overwrite its status).
// The platform-side limit is a looser backstop of a `total` quota (accounting/units.ts platformBackstopFor);
// a per-period quota is Rotor's alone (the platform only knows lifetime usage), so its backstop is -1. So is a
// user made under a name deleted before (UserData.incarnation): its sub account is the name's, whose lifetime
// usage on the platform holds the deleted customer's too, which the new customer's quota does not count.
//
// How many users' platform steps run at once (CallWindow): the seed shows no rate limits, so the window probes:
// it starts at SUB_ACCOUNT_WINDOW_START and grows while the platform answers (up to SUB_ACCOUNT_WINDOW_MAX),
// and halves when the platform answers like an overloaded one (a retried timeout, HTTP 429 or 5xx, code 500).
// Against a platform 20 ms away a batch of 1,000 new users took 1,333 calls / 16 × 20 ms ≈ 1.7 s at a fixed 16.
import { createLimitMbFor, platformBackstopFor } from '../accounting/units.ts';
import type { ProductCatalog } from '../accounting/products.ts';
import { isPlatformCode } from '../accounts/errors.ts';
import { mainAccountPresence } from '../accounts/main-account.ts';
import type { PlatformClient } from '../platform/client.ts';
import { CODE } from '../platform/codes.ts';
import { isRetryable, PlatformError } from '../platform/errors.ts';
import { ProductNotListedError } from '../platform/product-reader.ts';
import type { Logger } from '../telemetry/logger.ts';
import { PRODUCT_CHECK_MS, type ProductLookup } from './product-check.ts';
import type { UserData } from './record.ts';

export type SubAccountUser = Pick<UserData, 'name' | 'mainAccount' | 'product' | 'quota' | 'incarnation'>;

export interface EnsureOptions {
  /** A new user: create first, read only when the platform says the name exists (one call fewer). */
  fresh?: boolean;
  /** No info line per step (a batch logs one line for all). */
  quiet?: boolean;
}

/** What the users directory needs from the platform side. */
export interface SubAccountPort extends ProductLookup {
  /** Makes the platform side match the user; rejects with the platform's error when it refuses. */
  ensure(user: SubAccountUser, options?: EnsureOptions): Promise<void>;
}

/** Users' platform steps at once at first, and at most (the platform client's agent keeps room beside them). */
export const SUB_ACCOUNT_WINDOW_START = 16;
export const SUB_ACCOUNT_WINDOW_MAX = 64;

/**
 * Runs at most `limit` tasks at once, the others waiting first come, first served. The limit grows while tasks
 * end without strain: by one per task until the first strain (doubling per round of answers), then by one per
 * round (`limit` tasks) up to `max`. A strain (`run`'s callback, or a task failing with a retryable error)
 * halves it, at least 1, once per round: the strains of tasks that began before the last cut do not cut again.
 */
export class CallWindow {
  private limitNow: number;
  private inFlight = 0;
  /** Bounded by the callers: a batch runs at most its `concurrency` rows at once. */
  private readonly waiting: (() => void)[] = [];
  private sinceGrowth = 0;
  private strainedOnce = false;
  private epoch = 0;

  constructor(
    start: number,
    private readonly max: number,
  ) {
    this.limitNow = Math.max(1, Math.min(start, max));
  }

  get limit(): number {
    return this.limitNow;
  }

  async run<T>(task: (strain: () => void) => Promise<T>): Promise<T> {
    if (this.inFlight < this.limitNow && this.waiting.length === 0) this.inFlight++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    const epoch = this.epoch;
    let strained = false;
    const strain = (): void => {
      strained = true;
      this.cut(epoch);
    };
    try {
      const out = await task(strain);
      if (!strained) this.grow();
      return out;
    } catch (err) {
      if (isRetryable(err)) strain();
      throw err;
    } finally {
      this.inFlight--;
      this.pump();
    }
  }

  private grow(): void {
    if (this.limitNow >= this.max) return;
    if (!this.strainedOnce || ++this.sinceGrowth >= this.limitNow) {
      this.sinceGrowth = 0;
      this.limitNow++;
    }
  }

  private cut(epoch: number): void {
    if (epoch !== this.epoch) return;
    this.epoch++;
    this.strainedOnce = true;
    this.sinceGrowth = 0;
    this.limitNow = Math.max(1, this.limitNow >> 1);
  }

  private pump(): void {
    while (this.inFlight < this.limitNow && this.waiting.length > 0) {
      this.inFlight++;
      this.waiting.shift()!();
    }
  }
}

export class SubAccounts implements SubAccountPort {
  private readonly window: CallWindow;

  constructor(
    private readonly client: Pick<PlatformClient, 'call'>,
    private readonly products: ProductCatalog,
    private readonly logger?: Logger,
    window: { start: number; max: number } = { start: SUB_ACCOUNT_WINDOW_START, max: SUB_ACCOUNT_WINDOW_MAX },
  ) {
    this.window = new CallWindow(window.start, window.max);
  }

  /**
   * Whether the merchant's catalogue holds `productNo` (GetProductInfo, cached by the catalogue): false when the
   * platform refuses it, undefined when no answer came within `withinMs` or the call failed otherwise.
   */
  async knowsProduct(productNo: string, withinMs = PRODUCT_CHECK_MS): Promise<boolean | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(resolve, withinMs, undefined);
      timer.unref();
    });
    try {
      return await Promise.race([
        this.products.facts(productNo).then(
          () => true,
          // A refusal names the product, and so does a product query that does not list it (a platform without
          // GetProductInfo); a wrong secret (10001) says nothing of it.
          (err: unknown) =>
            err instanceof ProductNotListedError || (err instanceof PlatformError && !isRetryable(err) && err.platformCode !== CODE.DECRYPT)
              ? false
              : undefined,
        ),
        late,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Users' platform steps let through at once now. */
  get windowLimit(): number {
    return this.window.limit;
  }

  async ensure(u: SubAccountUser, options: EnsureOptions = {}): Promise<void> {
    const productNo = await this.products.productFor(u.product);
    if (!productNo) {
      this.logger?.warn({ user: u.name }, 'no dynamic product for the user: its platform sub account is not created');
      return;
    }
    const facts = await this.products.facts(productNo);
    if (!facts.dynamic) return;
    await this.window.run((strain) => this.steps(u, options, productNo, facts, { onRetry: strain }));
  }

  private async steps(
    u: SubAccountUser,
    options: EnsureOptions,
    productNo: string,
    facts: Awaited<ReturnType<ProductCatalog['facts']>>,
    call: { onRetry: () => void },
  ): Promise<void> {
    // No platform backstop: a per-period quota, or a name made again (see the top of this file).
    const periodic = u.quota.period !== 'total' || (u.incarnation ?? 0) > 0;
    const createdLimit = periodic ? -1 : createLimitMbFor(u.quota.bytes, facts.base);
    let created = false;
    if (u.name !== u.mainAccount && (options.fresh === true || !(await this.subExists(u.name, productNo, call)))) {
      const create = () =>
        this.client.call(
          'CreateProxyUser',
          { appUsername: u.name, appMainUsername: u.mainAccount, limitFlow: createdLimit, status: 1, remark: 'managed by rotor' },
          call,
        );
      try {
        await create();
        created = true;
        if (options.quiet !== true) this.logger?.info({ user: u.name, mainAccount: u.mainAccount }, 'sub account created on the platform');
      } catch (err) {
        if (!isPlatformCode(err, CODE.SUB_CREATE_FAILED)) throw err;
        // 10061: the name exists (a resumed creation), or the main account is missing or disabled.
        if (!(await this.subExists(u.name, productNo, call))) {
          // Missing: made now. Found: disabled, or made meanwhile by another creation under it (many run at
          // once; the first of a new account's users makes it): the second try tells them apart, a disabled
          // one refusing it again with 10061.
          await this.ensureMain(u.mainAccount, productNo, facts.proxyType);
          try {
            await create();
            created = true;
          } catch (again) {
            // 10061 again: disabled, unless the sub account was made meanwhile (another daemon of a fleet
            // finishing the same creation); then it is there, as wanted.
            if (!isPlatformCode(again, CODE.SUB_CREATE_FAILED) || !(await this.subExists(u.name, productNo, call))) throw again;
          }
        }
      }
    }
    if (facts.subAccountLimits && u.name !== u.mainAccount) {
      const limitFlow = periodic ? -1 : platformBackstopFor(u.quota.bytes);
      // Just created unlimited (-1): the platform already holds the backstop.
      if (created && limitFlow === -1 && createdLimit === -1) return;
      await this.client.call('SetProxyUserFlowLimit', { appUsername: u.name, productNo, limitFlow }, call);
    }
  }

  private async subExists(name: string, productNo: string, call: { onRetry: () => void }): Promise<boolean> {
    try {
      await this.client.call('GetProxyUserInfo', { appUsername: name, productNo }, call);
      return true;
    } catch (err) {
      // The seed names two codes for a missing sub account; a platform may answer this read with either.
      if (isPlatformCode(err, CODE.SUB_NOT_FOUND, CODE.SUB_USERNAME_NOT_FOUND)) return false;
      throw err;
    }
  }

  /**
   * Creates the main account unless the platform shows it (src/accounts/main-account.ts: ProxyInfo's 10052, or on a
   * platform answering an unknown name with an empty list or 10004, its same-name sub account); nothing when it is there.
   */
  private async ensureMain(account: string, productNo: string, proxyType: number): Promise<void> {
    if ((await mainAccountPresence(this.client, account, { productNo, proxyType })) === 'present') return;
    try {
      await this.client.call('CreateUser', { appUsername: account, status: 1 });
    } catch (err) {
      // 10051: there after all (made meanwhile, or a platform that could not say); the second try tells the rest.
      if (isPlatformCode(err, CODE.USER_EXISTS)) return;
      throw err;
    }
    this.logger?.info({ account }, 'main account created on the platform');
  }
}
