// The region codes a proxy user may name with `-region-<code>`: every area code of the platform's dictionary
// (GetArea, countries with their states and children) and every city code (GetCityList), loaded through the
// catalogue's cache. Without this check any `-region-<anything>` became a pool of its own, metric series of
// its own and a DrawByPwd the platform refused (10091): 300 names, 300 pools and 300 draws (issue 13).
// The gateway asks synchronously; until the first load has finished the answer is "unknown yet" and the
// gateway lets the name through (the pool registry's per-user bound still holds).
import type { Logger } from '../telemetry/logger.ts';
import type { AreaNode } from '../platform/schemas.ts';
import type { Catalog } from './catalog.ts';

export class RegionDirectory {
  private codes: Set<string> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly catalog: Pick<Catalog, 'areas' | 'cities'>,
    private readonly options: { refreshMs?: number; logger?: Logger } = {},
  ) {}

  /** true / false once the dictionaries are loaded; undefined before. Case-insensitive. */
  isKnown(code: string): boolean | undefined {
    return this.codes?.has(code.toUpperCase());
  }

  /** Loads now (errors are logged; the previous set stays) and then every refreshMs (default 1 h). */
  async start(): Promise<void> {
    await this.load();
    this.timer = setInterval(() => void this.load(), this.options.refreshMs ?? 3_600_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  async load(): Promise<void> {
    try {
      const [areas, cities] = await Promise.all([this.catalog.areas(), this.catalog.cities()]);
      const codes = new Set<string>();
      const walk = (nodes: readonly AreaNode[] | null | undefined): void => {
        for (const n of nodes ?? []) {
          codes.add(n.code.toUpperCase());
          walk(n.children);
        }
      };
      walk(areas);
      for (const c of cities) {
        codes.add(c.cityCode.toUpperCase());
        if (c.stateCode) codes.add(c.stateCode.toUpperCase());
        if (c.countryCode) codes.add(c.countryCode.toUpperCase());
      }
      this.codes = codes;
    } catch (err) {
      this.options.logger?.warn({ err }, 'region dictionaries could not be loaded; -region- codes are not checked until they are');
    }
  }
}
