// What accounting and accounts need to know about a dynamic product, read from the platform once and kept
// for a while: its proxy type (ProxyInfo, whitelist and return calls need it), its traffic base (units.ts),
// and which per-product features it has (sub-account limits, whitelist, flow log). A small cache of its own
// so the lower layers do not depend on the orders component's catalog.
import type { PlatformClient } from '../platform/client.ts';
import { ProductReader } from '../platform/product-reader.ts';
import { flowBase, type FlowBase } from './units.ts';

export interface ProductFacts {
  productNo: string;
  proxyType: number;
  /** 104 or 105 */
  dynamic: boolean;
  base: FlowBase;
  /** sold by IP count (`ipCount` > 0) rather than by traffic */
  byIpCount: boolean;
  /** proxyUserFlowLimit = 1: SetProxyUserFlowLimit and GetProxyUserInfo limits work */
  subAccountLimits: boolean;
  /** ipWhiteList = 1 */
  whitelist: boolean;
  /** flowUseLog = 1 */
  flowLog: boolean;
}

export type ProductClient = Pick<PlatformClient, 'call'>;

export interface ProductCatalogOptions {
  client: ProductClient;
  /** How long facts are kept; default 10 minutes. */
  ttlMs?: number;
  now?: () => number;
}

const DYNAMIC_TYPES = [104, 105];

export class ProductCatalog {
  private readonly client: ProductClient;
  private readonly reader: ProductReader;
  private readonly ttlMs: number;
  private readonly now: () => number;
  private readonly cache = new Map<string, { at: number; facts: Promise<ProductFacts> }>();
  private firstDynamic: { at: number; value: Promise<string | undefined> } | undefined;

  constructor(options: ProductCatalogOptions) {
    this.client = options.client;
    this.reader = new ProductReader(options.client);
    this.ttlMs = options.ttlMs ?? 600_000;
    this.now = options.now ?? Date.now;
  }

  /**
   * Facts of one product (GetProductInfo, else the product query: src/platform/product-reader.ts); platform
   * errors propagate and are not cached.
   */
  facts(productNo: string): Promise<ProductFacts> {
    const hit = this.cache.get(productNo);
    if (hit && this.now() - hit.at < this.ttlMs) return hit.facts;
    const facts = this.reader.read(productNo).then((p) => {
      const proxyType = Number(p.proxyType);
      return {
        productNo: p.productNo,
        proxyType,
        dynamic: DYNAMIC_TYPES.includes(proxyType),
        base: flowBase(p.flowConversionBase),
        byIpCount: Number(p.ipCount ?? 0) > 0,
        subAccountLimits: p.proxyUserFlowLimit === 1,
        whitelist: p.ipWhiteList === 1,
        flowLog: p.flowUseLog === 1,
      } satisfies ProductFacts;
    });
    this.cache.set(productNo, { at: this.now(), facts });
    facts.catch(() => {
      if (this.cache.get(productNo)?.facts === facts) this.cache.delete(productNo);
    });
    return facts;
  }

  /**
   * The product a user draws from: the configured one, else the first dynamic product the merchant is
   * authorized for (config: `product: ""`). Undefined when there is none.
   */
  async productFor(configured: string): Promise<string | undefined> {
    if (configured) return configured;
    const hit = this.firstDynamic;
    if (hit && this.now() - hit.at < this.ttlMs) return hit.value;
    const value = this.client.call('GetProductStock', { proxyType: DYNAMIC_TYPES }).then((list) => {
      const usable = list.filter((p) => DYNAMIC_TYPES.includes(Number(p.proxyType)) && (p.enable ?? 1) === 1);
      return usable[0]?.productNo;
    });
    this.firstDynamic = { at: this.now(), value };
    value.catch(() => {
      if (this.firstDynamic?.value === value) this.firstDynamic = undefined;
    });
    return value;
  }

  /** Forgets everything (a product callback says the catalog changed). */
  invalidate(productNo?: string): void {
    if (productNo) this.cache.delete(productNo);
    else this.cache.clear();
    this.firstDynamic = undefined;
  }
}
