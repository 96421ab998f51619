// The UpstreamAuthority (contracts.ts) over the platform's state: who may relay, and a meter that charges
// every relayed byte to the main account's balance for the product, to the sub account's use, and to the
// flow-use log (one entry per minute). A meter answers false once the balance or the sub-account limit is
// used up, or the account is disabled meanwhile; the upstream then closes the relay.
import type { Grant, Meter, UpstreamAuthority, DrawnCredential } from '../contracts.ts';
import type { SimProduct } from './catalog.ts';
import type { SimContext } from './context.ts';
import { subLimitBytes } from './accounts.ts';
import { INSTANCE_STATUS } from './lifecycle.ts';
import { isDynamic } from './open.ts';
import type { Balance, MainAccount, SubAccount } from './state.ts';

/** Minutes of flow log kept per balance (two weeks). */
const LOG_LIMIT = 20_160;

const refuse = (reason: string): Grant => ({ ok: false, reason, refusal: 'forbidden' });
const badCredentials = (): Grant => ({ ok: false, reason: 'bad credentials', refusal: 'credentials' });

export function createAuthority(ctx: SimContext): UpstreamAuthority {
  const { state } = ctx;

  const canRelay = (main: MainAccount, b: Balance | undefined, product: SimProduct, sub: SubAccount | null): string | null => {
    if (main.status !== 1) return 'main account disabled';
    if (sub && sub.status !== 1) return 'sub account disabled';
    if (!b) return 'no balance for this product';
    if (product.ipCount > 0) {
      if (b.ipTotal <= 0) return 'no IPs bought';
    } else if (b.usedBytes >= b.totalBytes) return 'balance exhausted';
    if (sub) {
      const limit = subLimitBytes(sub, product);
      if (limit >= 0 && (sub.used.get(product.productNo) ?? 0) >= limit) return 'sub account limit reached';
    }
    return null;
  };

  const trafficMeter = (main: MainAccount, b: Balance, product: SimProduct, sub: SubAccount | null): Meter => {
    const productNo = product.productNo;
    return {
      add(bytes: number): boolean {
        b.usedBytes += bytes;
        state.revision++;
        if (sub) sub.used.set(productNo, (sub.used.get(productNo) ?? 0) + bytes);
        const minute = Math.floor(ctx.clock.now() / 60_000) * 60;
        const last = b.log[b.log.length - 1];
        const balance = Math.max(0, b.totalBytes - b.usedBytes);
        if (last && last.minute === minute) {
          last.used += bytes;
          last.balance = balance;
          last.total = b.totalBytes;
        } else {
          b.log.push({ minute, used: bytes, total: b.totalBytes, balance });
          if (b.log.length > LOG_LIMIT) b.log.splice(0, b.log.length - LOG_LIMIT);
        }
        return canRelay(main, b, product, sub) === null;
      },
    };
  };

  const dynamicGrant = (main: MainAccount | undefined, productNo: string, sub: SubAccount | null): Grant => {
    if (!main) return refuse('unknown account');
    const product = state.product(productNo);
    if (!product || !isDynamic(product)) return refuse('unknown product');
    const b = main.balances.get(productNo);
    const why = canRelay(main, b, product, sub);
    if (why || !b) return refuse(why ?? 'no balance');
    return { ok: true, meter: trafficMeter(main, b, product, sub) };
  };

  return {
    authorizePassword(credential: DrawnCredential, password: string): Grant {
      const sub = state.subs.get(credential.account);
      if (!sub || sub.password !== password) return badCredentials();
      return dynamicGrant(state.mains.get(sub.main), credential.productNo, sub);
    },

    authorizeWhitelist(account: string, productNo: string, clientIp: string): Grant {
      const main = state.mains.get(account);
      const ip = clientIp.startsWith('::ffff:') ? clientIp.slice(7) : clientIp;
      if (!main?.balances.get(productNo)?.whitelist.includes(ip)) return refuse('address not on the whitelist');
      return dynamicGrant(main, productNo, null);
    },

    authorizeInstance(instanceNo: string, username: string, password: string): Grant {
      const inst = state.instances.get(instanceNo);
      if (!inst || inst.dynamic || inst.username !== username || inst.pwd !== password) return badCredentials();
      if (inst.status !== INSTANCE_STATUS.running) return refuse('instance not running');
      const expired = () => inst.userExpired > 0 && inst.userExpired * 1000 < ctx.clock.now();
      if (expired()) return refuse('instance expired');
      return {
        ok: true,
        meter: {
          add(bytes: number): boolean {
            state.instanceBytes.set(instanceNo, (state.instanceBytes.get(instanceNo) ?? 0) + bytes);
            state.revision++;
            return inst.status === INSTANCE_STATUS.running && !expired();
          },
        },
      };
    },
  };
}
