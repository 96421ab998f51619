// The drawer a pool uses: it reads the product record (catalog, cached), plans the draw (draw-plan.ts), says
// once why it departs from the user's config, and draws through the PwdDrawer or ApiDrawer the plan calls
// for. For products sold by IP count it spends the package carefully: one IP per draw, never more than
// ProxyInfo says remain, and the drawn exit is kept for its ipDuration (the node expires then).
import { RotorError } from '../errors/rotor-error.ts';
import { balanceEntry } from '../platform/balance-entry.ts';
import type { OpRequest, OpResponse } from '../platform/operations.ts';
import type { Logger } from '../telemetry/logger.ts';
import { planDraw, type DrawPlanOk, type DrawPlanUser, type DrawProductRecord } from './draw-plan.ts';
import type { Drawer, DrawerStatus } from './drawer.ts';
import type { PoolKey, UpstreamNode, UpstreamProtocol } from './types.ts';

/** The product refuses every way the user could draw (the reason says what to change). */
export class DrawNotAllowedError extends RotorError {
  constructor(message: string) {
    super('DRAW_NOT_ALLOWED', message, { httpStatus: 503, socksReply: 0x03 });
  }
}

export interface IpBalanceCaller {
  call(name: 'ProxyInfo', params: OpRequest<'ProxyInfo'>): Promise<OpResponse<'ProxyInfo'>>;
}

/** The proxyType a draw or balance read of this product names (seed 2.1: 104 dynamic overseas, 105 domestic). */
export function drawProxyType(record: Pick<DrawProductRecord, 'proxyType'>): 104 | 105 {
  return record.proxyType === 105 ? 105 : 104;
}

/**
 * The protocol of drawn strings that carry no scheme (`host:port:user:pass`, DrawByApi's `ip:port`): the product's
 * first listed (seed 2.6: 2 http, 3 https are HTTP proxies; 1, absent or anything else socks5, the seed's default).
 */
export function drawProtocol(record: Pick<DrawProductRecord, 'protocol'>): UpstreamProtocol {
  const first = String(record.protocol ?? '')
    .split(/[\s,;|]+/)
    .find((code) => code !== '');
  return first === '2' || first === '3' ? 'http' : 'socks5';
}

/**
 * IPs left in a main account's package for a product sold by IP count (ProxyInfo: ipTotal - ipUsed). The entry
 * is this product's, else a lone one that names no product (absent, "" or null: the field is not required, seed
 * 2.11): src/platform/balance-entry.ts.
 */
export async function ipsLeft(client: IpBalanceCaller, mainAccount: string, productNo: string, proxyType: 104 | 105): Promise<number> {
  const res = await client.call('ProxyInfo', { appUsername: mainAccount, productNo, proxyType });
  const entry = balanceEntry(res.list, productNo);
  return Math.max(0, Number(entry?.ipTotal ?? 0) - Number(entry?.ipUsed ?? 0));
}

export interface PlannedDrawerOptions {
  user: DrawPlanUser;
  key: PoolKey;
  /** The product record (src/orders/catalog.ts Catalog.product). */
  product: (productNo: string) => Promise<DrawProductRecord | undefined>;
  /** IPs left for (main account, product); required for products sold by IP count. */
  ipsLeft?: (mainAccount: string, productNo: string, proxyType: 104 | 105) => Promise<number>;
  /** The drawer for a plan (PwdDrawer/ApiDrawer, guarded) of this product record; built once per distinct plan. */
  build: (plan: DrawPlanOk, record: DrawProductRecord) => Drawer;
  logger?: Logger;
}

export class PlannedDrawer implements Drawer {
  private built: { signature: string; drawer: Drawer } | undefined;
  private readonly said = new Set<string>();
  private left: number | undefined;

  constructor(private readonly o: PlannedDrawerOptions) {}

  async draw(count: number): Promise<UpstreamNode[]> {
    const o = this.o;
    const record = await o.product(o.key.productNo);
    if (!record) throw new DrawNotAllowedError(`product ${o.key.productNo} is not authorized for the merchant`);
    const plan = planDraw(o.user, record, o.key.region);
    for (const note of plan.notes) this.sayOnce(note);
    if (!plan.ok) {
      this.sayOnce(plan.reason);
      throw new DrawNotAllowedError(plan.reason);
    }
    let n = count;
    if (plan.byIp) {
      if (!o.ipsLeft) throw new DrawNotAllowedError(`${record.productNo} is sold by IP count and Rotor cannot read the IPs left`);
      this.left = await o.ipsLeft(o.user.mainAccount, record.productNo, drawProxyType(record));
      if (this.left <= 0) throw new DrawNotAllowedError(`the IP package of ${o.user.mainAccount} for ${record.productNo} is used up`);
      // One exit at a time, kept for its ipDuration: every new exit spends an IP.
      n = 1;
    }
    const signature = JSON.stringify([plan.method, plan.account, plan.sessTime, drawProxyType(record)]);
    if (this.built?.signature !== signature) this.built = { signature, drawer: o.build(plan, record) };
    const nodes = await this.built.drawer.draw(n);
    if (plan.byIp && this.left !== undefined) this.left = Math.max(0, this.left - nodes.length);
    return nodes;
  }

  status(): DrawerStatus {
    return this.left === undefined ? {} : { ipsLeft: this.left };
  }

  /** A product's refusal holds for every draw: said once per pool, at warn. */
  private sayOnce(text: string): void {
    if (this.said.has(text)) return;
    this.said.add(text);
    this.o.logger?.warn({ user: this.o.user.name, productNo: this.o.key.productNo }, text);
  }
}
