// The catalogue: dictionaries and products, cached with a TTL (lru-cache fetch also folds concurrent misses
// into one platform call). What the seed asks a merchant to remember between listings is kept here:
// a product listed before and missing from a later full listing is no longer authorized (seed 1 rule 4);
// a segment listed before and missing later is offline (seed 2.6 rule 3).
import { LRUCache } from 'lru-cache';
import { PlatformError } from '../platform/errors.ts';
import { ProductNotListedError, ProductReader } from '../platform/product-reader.ts';
import { CODE } from '../platform/codes.ts';
import type { OpRequest } from '../platform/operations.ts';
import type { AreaNode, City, Product, Project } from '../platform/schemas.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { PlatformCaller } from './types.ts';

export const STATIC_PROXY_TYPES = [101, 102, 103, 201] as const;
export const DYNAMIC_PROXY_TYPES = [104, 105] as const;
export const ALL_PROXY_TYPES = [...STATIC_PROXY_TYPES, ...DYNAMIC_PROXY_TYPES];

export type ProductQuery = Omit<OpRequest<'GetProductStock'>, 'proxyType'> & { proxyType?: number[] };

export interface CatalogOptions {
  client: PlatformCaller;
  /** How long dictionaries and listings are reused; default 10 minutes. */
  ttlMs?: number;
  logger?: Logger;
  now?: () => number;
}

export interface OfflineSegment {
  cidr: string;
  /** When Rotor (or the platform's offlineCidrBlocks) saw it go: epoch ms, or the platform's text. */
  since: number | string;
}

/** Purchasable per seed 2.6 rule 1. */
export function isPurchasable(p: Pick<Product, 'enable' | 'inventory'>): boolean {
  return p.enable === 1 && (p.inventory ?? 0) > 0;
}

export function isDynamic(p: Pick<Product, 'proxyType'>): boolean {
  return p.proxyType === 104 || p.proxyType === 105;
}

type Entry = { value: unknown };
/** How a cache miss is loaded: passed with each fetch (lru-cache's fetch context), so no key is parsed back. */
type Loader = () => Promise<unknown>;

export class Catalog {
  private readonly client: PlatformCaller;
  /** One product: GetProductInfo, else the product query (src/platform/product-reader.ts). */
  private readonly reader: ProductReader;
  private readonly logger: Logger | undefined;
  private readonly now: () => number;
  private readonly cache: LRUCache<string, Entry, Loader>;
  /** productNo → proxyType of every product ever seen authorized. */
  private readonly known = new Map<string, number>();
  private readonly unauthorized = new Set<string>();
  private readonly segmentsSeen = new Map<string, Set<string>>();
  private readonly offline = new Map<string, Map<string, number | string>>();

  constructor(options: CatalogOptions) {
    this.client = options.client;
    this.reader = new ProductReader(options.client);
    this.logger = options.logger;
    this.now = options.now ?? Date.now;
    this.cache = new LRUCache<string, Entry, Loader>({
      max: 500,
      ttl: options.ttlMs ?? 600_000,
      ttlResolution: 0,
      perf: { now: () => this.now() },
      fetchMethod: async (_key, _stale, { context }) => ({ value: await context() }),
    });
  }

  async areas(codes?: string[]): Promise<AreaNode[]> {
    return (await this.get(`areas:${JSON.stringify(codes ?? null)}`, () =>
      this.client.call('GetArea', { codes: codes ?? null }),
    )) as AreaNode[];
  }

  async cities(codes?: string[]): Promise<City[]> {
    return (await this.get(`cities:${JSON.stringify(codes ?? null)}`, () =>
      this.client.call('GetCityList', { codes: codes ?? null }),
    )) as City[];
  }

  async projects(codes?: string[]): Promise<Project[]> {
    return (await this.get(`projects:${JSON.stringify(codes ?? null)}`, () =>
      this.client.call('GetProjectList', { codes: codes ?? null }),
    )) as Project[];
  }

  /** A product listing (GetProductStock); every proxy type when none is named. */
  async products(query: ProductQuery = {}): Promise<Product[]> {
    const q = { ...query, proxyType: query.proxyType?.length ? [...query.proxyType].sort() : ALL_PROXY_TYPES };
    const load = async (): Promise<Product[]> => {
      const list = await this.client.call('GetProductStock', q as OpRequest<'GetProductStock'>);
      this.learnListing(q as OpRequest<'GetProductStock'>, list);
      return list;
    };
    return (await this.get(`products:${JSON.stringify(q, Object.keys(q).sort())}`, load)) as Product[];
  }

  /**
   * One product; undefined when the merchant is not (or no longer) authorized for it.
   * `fresh` reads it in real time (GetProductInfo, else the product query) instead of from the cache.
   */
  async product(productNo: string, options: { fresh?: boolean } = {}): Promise<Product | undefined> {
    const key = `product:${productNo}`;
    // forceRefresh, not delete(): deleting aborts a fetch other callers await (lru-cache rejects them with
    // Error('deleted')), so concurrent orders for one product failed each other whenever the platform was
    // slow (found by test/reliability/platform-faults). A forced refresh joins a fetch already in flight.
    const context = () => this.loadProduct(productNo);
    const entry = await this.cache.fetch(key, options.fresh ? { forceRefresh: true, context } : { context });
    return entry?.value as Product | undefined;
  }

  /** Regions of a dynamic product (ProductAreaList). */
  async productAreas(productNo: string, proxyType: 104 | 105): Promise<unknown[]> {
    return (await this.get(`areas-of:${proxyType}:${productNo}`, () =>
      this.client.call('ProductAreaList', { productNo, proxyType }),
    )) as unknown[];
  }

  /**
   * A product callback: read it again and drop only the listings that hold this product (a callback must
   * not empty the whole catalogue: anyone can send one).
   */
  async refreshProduct(productNo: string): Promise<Product | undefined> {
    const fresh = await this.product(productNo, { fresh: true });
    for (const key of [...this.cache.keys()]) {
      if (!key.startsWith('products:')) continue;
      const listing = this.cache.peek(key)?.value;
      if (Array.isArray(listing) && listing.some((p: Product) => p.productNo === productNo)) this.cache.delete(key);
    }
    return fresh;
  }

  /** True/false once Rotor has learned it; undefined when the product was never seen. */
  isAuthorized(productNo: string): boolean | undefined {
    if (this.unauthorized.has(productNo)) return false;
    return this.known.has(productNo) ? true : undefined;
  }

  /** Segments of a product that are offline: gone from a later listing, or named by the platform. */
  offlineSegments(productNo: string): OfflineSegment[] {
    return [...(this.offline.get(productNo) ?? new Map<string, number | string>())].map(([cidr, since]) => ({ cidr, since }));
  }

  /** The segments that can be bought now: listed in the product's latest record and not offline. */
  availableSegments(product: Product): string[] {
    const off = this.offline.get(product.productNo);
    return (product.cidrBlocks ?? []).map((b) => b.cidr).filter((c) => !off?.has(c));
  }

  /** Forget cached listings and dictionaries (learned authorization and segment history are kept). */
  invalidate(): void {
    this.cache.clear();
  }

  private async get(key: string, load: Loader): Promise<unknown> {
    const entry = await this.cache.fetch(key, { context: load });
    return entry?.value;
  }

  private async loadProduct(productNo: string): Promise<Product | undefined> {
    try {
      const p = await this.reader.read(productNo);
      this.learnProduct(p);
      return p;
    } catch (err) {
      // A refusal (other than a system error) for a named product, that the product query does not list
      // either, means the merchant may not buy it.
      if ((err instanceof PlatformError && err.platformCode !== CODE.SYSTEM) || err instanceof ProductNotListedError) {
        this.markUnauthorized(productNo, false);
        return undefined;
      }
      throw err;
    }
  }

  private learnListing(query: OpRequest<'GetProductStock'>, list: Product[]): void {
    for (const p of list) this.learnProduct(p);
    // Only a listing restricted by nothing but proxy type shows everything the merchant may buy.
    const filtered = Object.keys(query).some((k) => k !== 'proxyType');
    if (filtered) return;
    const listed = new Set(list.map((p) => p.productNo));
    const types = new Set(query.proxyType);
    for (const [productNo, type] of this.known) {
      if (types.has(type) && !listed.has(productNo)) this.markUnauthorized(productNo);
    }
  }

  private learnProduct(p: Product): void {
    this.known.set(p.productNo, p.proxyType);
    this.unauthorized.delete(p.productNo);
    const current = new Set((p.cidrBlocks ?? []).map((b) => b.cidr));
    const seen = this.segmentsSeen.get(p.productNo) ?? new Set<string>();
    const off = this.offline.get(p.productNo) ?? new Map<string, number | string>();
    for (const cidr of seen) if (!current.has(cidr) && !off.has(cidr)) off.set(cidr, this.now());
    for (const cidr of current) {
      off.delete(cidr);
      seen.add(cidr);
    }
    for (const b of p.offlineCidrBlocks ?? []) if (!current.has(b.cidr)) off.set(b.cidr, b.offlineTime ?? this.now());
    this.segmentsSeen.set(p.productNo, seen);
    if (off.size) this.offline.set(p.productNo, off);
    else this.offline.delete(p.productNo);
  }

  /** `dropCached` false while the product's own fetch is running (deleting would abort it). */
  private markUnauthorized(productNo: string, dropCached = true): void {
    if (!this.unauthorized.has(productNo)) this.logger?.warn({ productNo }, 'product no longer authorized for this merchant');
    this.unauthorized.add(productNo);
    this.known.delete(productNo);
    if (dropCached) this.cache.delete(`product:${productNo}`);
  }
}
