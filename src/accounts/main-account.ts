// Whether a main account exists, as the platform lets Rotor tell. The seed has no "get main account": ProxyInfo
// (4.14) is asked for its balance of one product, and 10052 ("get user failed, user does not exist", part 7) says
// it is missing. But ProxyInfo is a list query and the seed does not say what it answers for a name never made:
// a platform may answer an empty list (no balances), or refuse the parameter (10004). Neither proves the account
// exists, nor that it is missing. Then the same-name sub account every main account owns (2.9) is read
// (GetProxyUserInfo): found, the account is there; not found (10062 or 10092), it is missing. Anything else
// leaves it unknown, and the caller asks CreateUser and takes 10051 ("user name already exists") as "there".
// A read, not a blind CreateUser: CreateUser "creates or modifies", so on an existing account it would write its
// status — re-enabling an account the operator disabled.
import type { PlatformClient } from '../platform/client.ts';
import { CODE } from '../platform/codes.ts';
import { isPlatformCode } from './errors.ts';

/** present: the platform showed it; missing: the platform said so; unknown: no answer told (ask CreateUser). */
export type MainAccountPresence = 'present' | 'missing' | 'unknown';

export interface MainAccountProduct {
  productNo: string;
  proxyType: number;
}

export async function mainAccountPresence(
  client: Pick<PlatformClient, 'call'>,
  account: string,
  product: MainAccountProduct,
): Promise<MainAccountPresence> {
  try {
    const info = await client.call('ProxyInfo', {
      appUsername: account,
      proxyType: product.proxyType as 104 | 105,
      productNo: product.productNo,
    });
    if ((info.list ?? []).length > 0) return 'present';
  } catch (err) {
    if (isPlatformCode(err, CODE.USER_NOT_FOUND)) return 'missing';
    if (!isPlatformCode(err, CODE.INVALID_PARAMS)) throw err;
  }
  // An empty list or a parameter refusal: the same-name sub account tells.
  try {
    await client.call('GetProxyUserInfo', { appUsername: account, productNo: product.productNo });
    return 'present';
  } catch (err) {
    if (isPlatformCode(err, CODE.SUB_NOT_FOUND, CODE.SUB_USERNAME_NOT_FOUND)) return 'missing';
    if (isPlatformCode(err, CODE.INVALID_PARAMS)) return 'unknown';
    throw err;
  }
}
