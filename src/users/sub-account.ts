// A user's platform side: its sub account (CreateProxyUser, appUsername = the user's name) under its main
// account, and the platform-side limit (SetProxyUserFlowLimit). Every step reads before it writes, so running
// it again — after a crash between the platform call and the store write, or by another daemon — ends in the
// same state: that is what makes the creation journal (src/users/directory.ts) safe to resume.
// A missing main account is created too (CreateUser only after ProxyInfo said 10052: CreateUser "creates or
// modifies", so calling it on an existing account would overwrite its status).
// The platform-side limit is a looser backstop of a `total` quota (accounting/units.ts platformBackstopFor);
// a per-period quota is Rotor's alone (the platform only knows lifetime usage), so its backstop is -1.
import { createLimitMbFor, platformBackstopFor } from '../accounting/units.ts';
import type { ProductCatalog } from '../accounting/products.ts';
import { isPlatformCode } from '../accounts/errors.ts';
import type { PlatformClient } from '../platform/client.ts';
import { CODE } from '../platform/codes.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { UserData } from './record.ts';

export type SubAccountUser = Pick<UserData, 'name' | 'mainAccount' | 'product' | 'quota'>;

export interface EnsureOptions {
  /** A new user: create first, read only when the platform says the name exists (one call fewer). */
  fresh?: boolean;
  /** No info line per step (a batch logs one line for all). */
  quiet?: boolean;
}

/** What the users directory needs from the platform side. */
export interface SubAccountPort {
  /** Makes the platform side match the user; rejects with the platform's error when it refuses. */
  ensure(user: SubAccountUser, options?: EnsureOptions): Promise<void>;
}

export class SubAccounts implements SubAccountPort {
  constructor(
    private readonly client: Pick<PlatformClient, 'call'>,
    private readonly products: ProductCatalog,
    private readonly logger?: Logger,
  ) {}

  async ensure(u: SubAccountUser, options: EnsureOptions = {}): Promise<void> {
    const productNo = await this.products.productFor(u.product);
    if (!productNo) {
      this.logger?.warn({ user: u.name }, 'no dynamic product for the user: its platform sub account is not created');
      return;
    }
    const facts = await this.products.facts(productNo);
    if (!facts.dynamic) return;
    const periodic = u.quota.period !== 'total';
    const createdLimit = periodic ? -1 : createLimitMbFor(u.quota.bytes, facts.base);
    let created = false;
    if (u.name !== u.mainAccount && (options.fresh === true || !(await this.subExists(u.name, productNo)))) {
      const create = () =>
        this.client.call('CreateProxyUser', {
          appUsername: u.name,
          appMainUsername: u.mainAccount,
          limitFlow: createdLimit,
          status: 1,
          remark: 'managed by rotor',
        });
      try {
        await create();
        created = true;
        if (options.quiet !== true) this.logger?.info({ user: u.name, mainAccount: u.mainAccount }, 'sub account created on the platform');
      } catch (err) {
        if (!isPlatformCode(err, CODE.SUB_CREATE_FAILED)) throw err;
        // 10061: the name exists (a resumed creation), or the main account is missing or disabled.
        if (!(await this.subExists(u.name, productNo))) {
          if (!(await this.ensureMain(u.mainAccount, productNo, facts.proxyType))) throw err;
          await create();
          created = true;
        }
      }
    }
    if (facts.subAccountLimits && u.name !== u.mainAccount) {
      const limitFlow = periodic ? -1 : platformBackstopFor(u.quota.bytes);
      // Just created unlimited (-1): the platform already holds the backstop.
      if (created && limitFlow === -1 && createdLimit === -1) return;
      await this.client.call('SetProxyUserFlowLimit', { appUsername: u.name, productNo, limitFlow });
    }
  }

  private async subExists(name: string, productNo: string): Promise<boolean> {
    try {
      await this.client.call('GetProxyUserInfo', { appUsername: name, productNo });
      return true;
    } catch (err) {
      // The seed names two codes for a missing sub account; a platform may answer this read with either.
      if (isPlatformCode(err, CODE.SUB_NOT_FOUND, CODE.SUB_USERNAME_NOT_FOUND)) return false;
      throw err;
    }
  }

  /** Creates the main account when the platform says it is missing; false when it exists (then unusable). */
  private async ensureMain(account: string, productNo: string, proxyType: number): Promise<boolean> {
    try {
      await this.client.call('ProxyInfo', { appUsername: account, proxyType: proxyType as 104 | 105, productNo });
      return false;
    } catch (err) {
      if (!isPlatformCode(err, CODE.USER_NOT_FOUND)) throw err;
    }
    await this.client.call('CreateUser', { appUsername: account, status: 1 });
    this.logger?.info({ account }, 'main account created on the platform');
    return true;
  }
}
