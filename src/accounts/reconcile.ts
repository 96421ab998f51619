// Makes the platform's dynamic accounts match the config, at start and on every reload: each user's main
// account (CreateUser) and sub account (CreateProxyUser, appUsername = the local user name) exist, the
// configured verification is synced (UserAuth), and users whose account is disabled are refused with a
// clear reason (through Accounting's admission).
//
// Why existence is read before anything is created: CreateUser "creates or modifies", so calling it on an
// existing main account would overwrite its status — re-enabling an account the operator disabled. Rotor
// therefore reads first (main-account.ts: ProxyInfo's 10052, or — a platform answering an unknown name with an
// empty list or 10004 — the same-name sub account) and creates only what is missing. The seed has no "get main
// account": its status is read from the same-name sub account every main account owns (GetProxyUserInfo),
// which follows the main account's status.
// "Already exists" answers are successes once the account is read back: 10051 (CreateUser) when the read then
// does not say the main account is missing; 10061 (CreateProxyUser) when GetProxyUserInfo then finds the sub
// account — otherwise 10061 means the main account is missing or disabled, and the user is refused saying so.
import type { PlatformClient } from '../platform/client.ts';
import { CODE } from '../platform/codes.ts';
import type { Accounting } from '../accounting/accounting.ts';
import type { ProductCatalog, ProductFacts } from '../accounting/products.ts';
import { createLimitMbFor } from '../accounting/units.ts';
import type { Logger } from '../telemetry/logger.ts';
import { AccountsError, isPlatformCode } from './errors.ts';
import { mainAccountPresence } from './main-account.ts';

/** A config user as reconciliation needs it (config users[]). */
export interface AccountUser {
  name: string;
  mainAccount: string;
  product: string;
  draw: 'pwd' | 'api';
  limitBytes: number;
}

/** Verification to sync for a main account (UserAuth). Proposed config: `accounts.<mainAccount>.auth`. */
export interface MainAccountAuth {
  authType: 1 | 2 | 3;
  authName?: string;
  no?: string;
  vsp?: string;
}

export interface ReconcileOptions {
  /** Verification per main account name. */
  auth?: Readonly<Record<string, MainAccountAuth>>;
}

export type AccountAction = 'created' | 'exists' | 'skipped' | 'error';

export interface MainAccountResult {
  account: string;
  productNo: string | undefined;
  action: AccountAction;
  /** 1 normal, 2 disabled; undefined when unknown */
  status: number | undefined;
  authStatus?: number;
  error?: string;
}

export interface SubAccountResult {
  user: string;
  mainAccount: string;
  productNo: string | undefined;
  action: AccountAction;
  status: number | undefined;
  error?: string;
}

export interface ReconcileReport {
  mains: MainAccountResult[];
  subs: SubAccountResult[];
  /** Users refused after this pass, with the reason they are given. */
  refused: { user: string; reason: string }[];
}

export interface AccountReconcilerOptions {
  client: Pick<PlatformClient, 'call'>;
  products: ProductCatalog;
  /** Refusals for disabled accounts go through its admission; optional for tools that only reconcile. */
  accounting?: Accounting;
  logger?: Logger;
}

/** The cause under which account refusals are registered with Accounting. */
export const ACCOUNT_REFUSAL = 'account';

export class AccountReconciler {
  private readonly client: Pick<PlatformClient, 'call'>;
  private readonly products: ProductCatalog;
  private readonly accounting: Accounting | undefined;
  private readonly logger: Logger | undefined;
  private readonly refusedUsers = new Map<string, string>();

  constructor(options: AccountReconcilerOptions) {
    this.client = options.client;
    this.products = options.products;
    this.accounting = options.accounting;
    this.logger = options.logger;
  }

  /** The reason a user is refused for an account problem, if any (as of the last pass). */
  refusal(user: string): string | undefined {
    return this.refusedUsers.get(user);
  }

  async reconcile(users: readonly AccountUser[], options: ReconcileOptions = {}): Promise<ReconcileReport> {
    const report: ReconcileReport = { mains: [], subs: [], refused: [] };
    const byMain = new Map<string, AccountUser[]>();
    for (const u of users) {
      const list = byMain.get(u.mainAccount) ?? [];
      list.push(u);
      byMain.set(u.mainAccount, list);
    }
    const verdicts = new Map<string, string | null | undefined>();
    for (const [account, members] of byMain) {
      const main = await this.reconcileMain(account, members, options.auth?.[account]);
      report.mains.push(main);
      for (const u of members) {
        // Nothing is created under a main account that could not be reconciled.
        const sub: SubAccountResult =
          main.action === 'error'
            ? {
                user: u.name,
                mainAccount: account,
                productNo: main.productNo,
                action: 'skipped',
                status: undefined,
                error: 'main account not reconciled',
              }
            : await this.reconcileSub(u, main);
        report.subs.push(sub);
        verdicts.set(u.name, this.verdict(u, main, sub));
      }
    }
    // Users no longer configured keep no account refusal.
    for (const user of [...this.refusedUsers.keys()]) if (!verdicts.has(user)) this.applyRefusal(user, null);
    for (const [user, reason] of verdicts) {
      if (reason === undefined) continue;
      this.applyRefusal(user, reason);
      if (reason !== null) report.refused.push({ user, reason });
    }
    const created = report.mains.filter((m) => m.action === 'created').length + report.subs.filter((s) => s.action === 'created').length;
    const failed = report.mains.filter((m) => m.action === 'error').length + report.subs.filter((s) => s.action === 'error').length;
    // At debug: the composition root logs the report itself (one line per startup fact).
    this.logger?.debug(
      { created, failed, refused: report.refused.length, mains: report.mains.length, subs: report.subs.length },
      'platform accounts reconciled',
    );
    return report;
  }

  /** null: allowed; a string: refused with it; undefined: unknown this pass (keep what was decided before). */
  private verdict(u: AccountUser, main: MainAccountResult, sub: SubAccountResult): string | null | undefined {
    if (main.status === 2) return `main account ${u.mainAccount} is disabled on the platform`;
    if (sub.status === 2) return `sub account ${u.name} is disabled on the platform`;
    if (main.action === 'error' && main.error?.startsWith('MAIN_ACCOUNT_NAME_TAKEN'))
      return `main account name ${u.mainAccount} is taken on the platform`;
    if (sub.action === 'error' && sub.error?.startsWith('MAIN_ACCOUNT_UNUSABLE'))
      return `main account ${u.mainAccount} is missing or disabled on the platform`;
    if (main.action === 'error' || sub.action === 'error') return undefined;
    return null;
  }

  private applyRefusal(user: string, reason: string | null): void {
    const before = this.refusedUsers.get(user) ?? null;
    if (reason === null) this.refusedUsers.delete(user);
    else this.refusedUsers.set(user, reason);
    this.accounting?.setRefusal(user, ACCOUNT_REFUSAL, reason);
    if (before !== reason) {
      if (reason !== null) this.logger?.warn({ user, reason }, 'user refused: account unusable');
      else if (before !== null) this.logger?.info({ user }, 'user admitted again: account usable');
    }
  }

  private async productOf(members: readonly AccountUser[]): Promise<ProductFacts | undefined> {
    for (const u of members) {
      const productNo = await this.products.productFor(u.product);
      if (!productNo) continue;
      const facts = await this.products.facts(productNo);
      if (facts.dynamic) return facts;
    }
    return undefined;
  }

  private async reconcileMain(
    account: string,
    members: readonly AccountUser[],
    auth: MainAccountAuth | undefined,
  ): Promise<MainAccountResult> {
    let product: ProductFacts | undefined;
    const result: MainAccountResult = { account, productNo: undefined, action: 'exists', status: undefined };
    try {
      product = await this.productOf(members);
      if (!product) {
        result.action = 'skipped';
        result.error = 'NO_PRODUCT: no dynamic product to check the account against';
        this.logger?.warn({ account }, 'main account not reconciled: its users have no dynamic product');
        return result;
      }
      result.productNo = product.productNo;
      if ((await mainAccountPresence(this.client, account, product)) === 'present') {
        result.status = await this.ownSubStatus(account, product.productNo);
      } else {
        try {
          const created = await this.client.call('CreateUser', {
            appUsername: account,
            status: 1,
            ...(auth ? { authType: auth.authType, authName: auth.authName, no: auth.no } : {}),
          });
          result.action = 'created';
          result.status = created.status ?? 1;
          if (created.authStatus !== undefined && created.authStatus !== null) result.authStatus = created.authStatus;
          this.logger?.info({ account }, 'main account created on the platform');
        } catch (err) {
          if (!isPlatformCode(err, CODE.USER_EXISTS)) throw err;
          // Created meanwhile (or by another Rotor): read it back before calling it a success. A platform that
          // cannot say (unknown) has just said the name exists.
          if ((await mainAccountPresence(this.client, account, product)) === 'missing') {
            throw new AccountsError(
              'MAIN_ACCOUNT_NAME_TAKEN',
              `main account name ${account} is taken by an account that is not a main account`,
              { cause: err },
            );
          }
          result.status = await this.ownSubStatus(account, product.productNo);
        }
      }
      if (auth && result.action !== 'created') {
        const answer = await this.client.call('UserAuth', { appUsername: account, ...auth });
        if (answer.authStatus !== undefined && answer.authStatus !== null) result.authStatus = answer.authStatus;
        this.logger?.info({ account, authStatus: result.authStatus }, 'main account verification synced');
      }
    } catch (err) {
      result.action = 'error';
      result.error = describe(err);
      this.logger?.warn({ account, err }, 'main account reconcile failed');
    }
    return result;
  }

  /** Status of the same-name sub account a main account owns; undefined when it cannot be read. */
  private async ownSubStatus(account: string, productNo: string): Promise<number | undefined> {
    try {
      const info = await this.client.call('GetProxyUserInfo', { appUsername: account, productNo });
      return info.status ?? undefined;
    } catch (err) {
      if (isPlatformCode(err, CODE.SUB_NOT_FOUND)) return undefined;
      throw err;
    }
  }

  private async reconcileSub(u: AccountUser, main: MainAccountResult): Promise<SubAccountResult> {
    const result: SubAccountResult = {
      user: u.name,
      mainAccount: u.mainAccount,
      productNo: undefined,
      action: 'exists',
      status: undefined,
    };
    try {
      const productNo = await this.products.productFor(u.product);
      const facts = productNo ? await this.products.facts(productNo) : undefined;
      if (!facts || !facts.dynamic) {
        result.action = 'skipped';
        result.error = 'NO_PRODUCT: the user has no dynamic product';
        return result;
      }
      result.productNo = facts.productNo;
      // A user named like its main account is that main account's own sub account.
      if (u.name === u.mainAccount) {
        result.status = main.status;
        return result;
      }
      const found = await this.subInfo(u.name, facts.productNo);
      if (found) {
        result.status = found.status;
        return result;
      }
      const limitBytes = this.accounting?.limitOf(u.name) ?? u.limitBytes;
      try {
        const created = await this.client.call('CreateProxyUser', {
          appUsername: u.name,
          appMainUsername: u.mainAccount,
          limitFlow: createLimitMbFor(limitBytes, facts.base),
          status: 1,
          remark: 'managed by rotor',
        });
        result.action = 'created';
        result.status = created.status ?? 1;
        this.logger?.info({ user: u.name, mainAccount: u.mainAccount }, 'sub account created on the platform');
      } catch (err) {
        if (!isPlatformCode(err, CODE.SUB_CREATE_FAILED)) throw err;
        // One code for three conditions: the name exists (read it back), or the main account is missing or disabled.
        const again = await this.subInfo(u.name, facts.productNo);
        if (!again) {
          throw new AccountsError(
            'MAIN_ACCOUNT_UNUSABLE',
            `sub account ${u.name} cannot be created: main account ${u.mainAccount} is missing or disabled`,
            { cause: err },
          );
        }
        result.status = again.status;
      }
    } catch (err) {
      result.action = 'error';
      result.error = describe(err);
      this.logger?.warn({ user: u.name, err }, 'sub account reconcile failed');
    }
    return result;
  }

  private async subInfo(user: string, productNo: string): Promise<{ status: number | undefined } | undefined> {
    try {
      const info = await this.client.call('GetProxyUserInfo', { appUsername: user, productNo });
      return { status: info.status ?? undefined };
    } catch (err) {
      if (isPlatformCode(err, CODE.SUB_NOT_FOUND)) return undefined;
      throw err;
    }
  }
}

function describe(err: unknown): string {
  if (err instanceof AccountsError) return `${err.code}: ${err.message}`;
  const e = err as { code?: string; message?: string };
  return `${e.code ?? 'ERROR'}: ${e.message ?? String(err)}`;
}
