// The products a proxy user may name with `-product-<productNo>`: those the merchant's catalogue holds, from
// one full listing (GetProductStock, every proxy type) at start and every refreshMs, plus whatever the
// catalogue learned since (a product read, a callback; a product dropped from a later listing is refused).
// Without this check any `-product-<anything>` was taken as given: each distinct forged name cost a catalogue
// look-up on the platform (GetProductInfo) and a pool, a platform call per connection on the reseller's key.
// The router asks synchronously, before any pool: true / false once a listing has loaded; undefined before
// (the router then refuses a name the catalogue has not seen rather than look it up per connection). A listing
// that fails is tried again after retryMs until one loads; a later failure keeps what was learned.
import type { Logger } from '../telemetry/logger.ts';

/** What this reads of the catalogue (src/orders/catalog.ts Catalog). */
export interface ProductCatalogue {
  /** The full listing (it teaches the catalogue every product the merchant may buy). */
  products(): Promise<readonly unknown[]>;
  /** true / false once the catalogue has learned it; undefined when never seen. */
  isAuthorized(productNo: string): boolean | undefined;
}

export interface ProductNamesOptions {
  /** The listing read again this often. Default 1 h. */
  refreshMs?: number;
  /** Until a listing has loaded, tried again this often. Default 30 s. */
  retryMs?: number;
  logger?: Logger | undefined;
}

export class ProductNames {
  private loaded = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly catalog: ProductCatalogue,
    private readonly options: ProductNamesOptions = {},
  ) {}

  /** true: the catalogue holds it; false: it does not (or no longer); undefined: no listing has loaded yet. */
  isKnown(productNo: string): boolean | undefined {
    const authorized = this.catalog.isAuthorized(productNo);
    if (authorized !== undefined) return authorized;
    return this.loaded ? false : undefined;
  }

  /** Loads now (a failure is logged), then again every refreshMs (retryMs until one has loaded). */
  async start(): Promise<void> {
    await this.load();
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  async load(): Promise<void> {
    try {
      await this.catalog.products();
      this.loaded = true;
    } catch (err) {
      this.options.logger?.warn({ err }, 'product listing not loaded; -product- names the catalogue has not seen are refused meanwhile');
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    const ms = this.loaded ? (this.options.refreshMs ?? 3_600_000) : (this.options.retryMs ?? 30_000);
    this.timer = setTimeout(() => void this.load().then(() => this.schedule()), ms);
    this.timer.unref();
  }
}
