// The region codes a proxy user may name with `-region-<code>`: every area code of the platform's dictionary
// (GetArea, countries with their states and children) and every city code (GetCityList), loaded through the
// catalogue's cache. Without this check any `-region-<anything>` became a pool of its own, metric series of
// its own and a DrawByPwd the platform refused (10091): 300 names, 300 pools and 300 draws (issue 13).
// The gateway asks synchronously; until the first load has finished the answer is "unknown yet" and the
// gateway lets the name through (the pool registry's per-user bound still holds).
// A code is matched case-insensitively (customers type `-region-usa`) and answered in the dictionary's own
// spelling, which the gateway keys the pool by and the draw sends: a platform that looks `addressCode` up as
// written (the sandbox does) refused `usa` with 10091, and each spelling was a pool of its own.
import type { Logger } from '../telemetry/logger.ts';
import type { AreaNode } from '../platform/schemas.ts';
import type { Catalog } from './catalog.ts';

export class RegionDirectory {
  /** Upper-cased code → the dictionary's spelling (the first one met). */
  private codes: Map<string, string> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly catalog: Pick<Catalog, 'areas' | 'cities'>,
    private readonly options: { refreshMs?: number; logger?: Logger } = {},
  ) {}

  /** true / false once the dictionaries are loaded; undefined before. Case-insensitive. */
  isKnown(code: string): boolean | undefined {
    return this.codes?.has(code.toUpperCase());
  }

  /** The dictionary's spelling of a code matched case-insensitively; false when it is none; undefined before the first load. */
  spelling(code: string): string | false | undefined {
    if (!this.codes) return undefined;
    return this.codes.get(code.toUpperCase()) ?? false;
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
      const codes = new Map<string, string>();
      const add = (code: string): void => {
        const key = code.toUpperCase();
        if (!codes.has(key)) codes.set(key, code);
      };
      const walk = (nodes: readonly AreaNode[] | null | undefined): void => {
        for (const n of nodes ?? []) {
          add(n.code);
          walk(n.children);
        }
      };
      walk(areas);
      for (const c of cities) {
        add(c.cityCode);
        if (c.stateCode) add(c.stateCode);
        if (c.countryCode) add(c.countryCode);
      }
      this.codes = codes;
    } catch (err) {
      this.options.logger?.warn({ err }, 'region dictionaries could not be loaded; -region- codes are not checked until they are');
    }
  }
}
