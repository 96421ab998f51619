// The IP whitelist of main accounts whose users draw by API (DrawByApi + extraction link): the platform only
// serves those links and proxies to whitelisted addresses, so Rotor adds its own egress address before such
// users draw. Rotor records (store kv `whitelist.added`) exactly the entries it added, and removes only those
// when no configured user needs them any more; entries someone else put there (the operator, the admin
// routes) are never removed by reconciliation.
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { PlatformClient } from '../platform/client.ts';
import { balanceEntry } from '../platform/balance-entry.ts';
import { CODE } from '../platform/codes.ts';
import type { ProductCatalog, ProductFacts } from '../accounting/products.ts';
import type { SettingsStore } from '../store/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import { AccountsError, isPlatformCode } from './errors.ts';

export interface WhitelistEntry {
  account: string;
  productNo: string;
  ip: string;
}

export interface WhitelistUser {
  name: string;
  mainAccount: string;
  product: string;
  draw: 'pwd' | 'api';
}

export interface WhitelistReport {
  added: WhitelistEntry[];
  removed: WhitelistEntry[];
  /** needed and already on the platform */
  kept: WhitelistEntry[];
  errors: { entry: WhitelistEntry; error: string }[];
}

export interface WhitelistOptions {
  client: Pick<PlatformClient, 'call'>;
  products: ProductCatalog;
  store: Pick<SettingsStore, 'kvGet' | 'kvSet'>;
  /**
   * The address the platform sees Rotor's requests and proxy connections come from: fixed (config; 127.0.0.1
   * in embedded mode and tests), or learned once by a function (e.g. fetchEgressIp(url)).
   */
  egressIp: string | (() => Promise<string>);
  logger?: Logger;
}

const ADDED_KEY = 'whitelist.added';
const same = (a: WhitelistEntry, b: WhitelistEntry) => a.account === b.account && a.productNo === b.productNo && a.ip === b.ip;

export class Whitelist {
  private readonly client: Pick<PlatformClient, 'call'>;
  private readonly products: ProductCatalog;
  private readonly store: Pick<SettingsStore, 'kvGet' | 'kvSet'>;
  private readonly egressSource: string | (() => Promise<string>);
  private readonly logger: Logger | undefined;
  private egressIp: Promise<string> | undefined;
  /** (account, productNo) pairs known to hold the egress address in this process */
  private readonly ensured = new Set<string>();
  private chain: Promise<unknown> = Promise.resolve();

  constructor(options: WhitelistOptions) {
    this.client = options.client;
    this.products = options.products;
    this.store = options.store;
    this.egressSource = options.egressIp;
    this.logger = options.logger;
  }

  /** The egress address, learned once. */
  egress(): Promise<string> {
    if (!this.egressIp) {
      const source = this.egressSource;
      const learned = (typeof source === 'string' ? Promise.resolve(source) : source()).then((ip) => {
        const clean = ip.trim();
        if (!isIP(clean)) throw new AccountsError('EGRESS_UNKNOWN', 'the egress address to whitelist is not an IP address');
        return clean;
      });
      this.egressIp = learned;
      learned.catch(() => {
        if (this.egressIp === learned) this.egressIp = undefined;
      });
    }
    return this.egressIp;
  }

  /** What Rotor added and still owns. */
  async added(): Promise<WhitelistEntry[]> {
    return (await this.store.kvGet<WhitelistEntry[]>(ADDED_KEY)) ?? [];
  }

  /**
   * Makes the whitelist match the config (at start and on reload): the egress address is on the list of
   * every (main account, product) with an `api` user; what Rotor added earlier and is no longer needed is
   * removed.
   */
  reconcile(users: readonly WhitelistUser[]): Promise<WhitelistReport> {
    return this.serial(() => this.reconcileNow(users));
  }

  /**
   * Before a DrawByApi draw: the egress address is on (account, productNo)'s list. Cheap after the first call.
   */
  async ensure(account: string, productNo: string): Promise<void> {
    if (this.ensured.has(`${account}\n${productNo}`)) return;
    await this.serial(async () => {
      const ip = await this.egress();
      await this.addOwned({ account, productNo, ip }, await this.facts(productNo));
    });
  }

  /** The platform's list (ProxyInfo `ipWhiteList`). */
  async list(account: string, productNo: string): Promise<string[]> {
    const facts = await this.facts(productNo);
    const info = await this.client.call('ProxyInfo', { appUsername: account, proxyType: facts.proxyType as 104 | 105, productNo });
    const entry = balanceEntry(info.list, productNo);
    return entry?.ipWhiteList ?? [];
  }

  /** Admin add: the platform's list afterwards. Not recorded as Rotor's (reconcile never removes it). */
  async add(account: string, productNo: string, ip: string): Promise<string[]> {
    if (!isIP(ip)) throw new AccountsError('INVALID_INPUT', 'ip must be an IP address');
    const facts = await this.facts(productNo);
    const answer = await this.client.call('AddIpWhiteList', {
      appUsername: account,
      ip,
      proxyType: facts.proxyType as 104 | 105,
      productNo,
    });
    this.logger?.info({ account, productNo, ip }, 'whitelist address added');
    return answer.ipWhiteList ?? [];
  }

  /** Admin remove: the platform's list afterwards; forgets Rotor's record of it too. */
  remove(account: string, productNo: string, ip: string): Promise<string[]> {
    return this.serial(async () => {
      const facts = await this.facts(productNo);
      const answer = await this.client.call('DelIpWhiteList', {
        appUsername: account,
        ip,
        proxyType: facts.proxyType as 104 | 105,
        productNo,
      });
      await this.forget({ account, productNo, ip });
      this.logger?.info({ account, productNo, ip }, 'whitelist address removed');
      return answer.ipWhiteList ?? [];
    });
  }

  private async reconcileNow(users: readonly WhitelistUser[]): Promise<WhitelistReport> {
    const report: WhitelistReport = { added: [], removed: [], kept: [], errors: [] };
    const apiUsers = users.filter((u) => u.draw === 'api');
    const needed: WhitelistEntry[] = [];
    if (apiUsers.length > 0) {
      const ip = await this.egress();
      for (const u of apiUsers) {
        const productNo = await this.products.productFor(u.product);
        if (!productNo) continue;
        const entry = { account: u.mainAccount, productNo, ip };
        if (!needed.some((n) => same(n, entry))) needed.push(entry);
      }
    }
    for (const entry of needed) {
      try {
        const facts = await this.facts(entry.productNo);
        if (!facts.whitelist) throw new AccountsError('NOT_SUPPORTED', `product ${entry.productNo} has no IP whitelist`);
        const outcome = await this.addOwned(entry, facts);
        (outcome === 'added' ? report.added : report.kept).push(entry);
      } catch (err) {
        report.errors.push({ entry, error: (err as Error).message });
        this.logger?.warn({ ...entry, err }, 'whitelist entry could not be added');
      }
    }
    for (const entry of await this.added()) {
      if (needed.some((n) => same(n, entry))) continue;
      try {
        const facts = await this.facts(entry.productNo);
        await this.client.call('DelIpWhiteList', {
          appUsername: entry.account,
          ip: entry.ip,
          proxyType: facts.proxyType as 104 | 105,
          productNo: entry.productNo,
        });
        report.removed.push(entry);
        this.logger?.info(entry, 'whitelist address Rotor added is no longer needed; removed');
      } catch (err) {
        // The account is gone: nothing left to remove.
        if (!isPlatformCode(err, CODE.USER_NOT_FOUND)) {
          report.errors.push({ entry, error: (err as Error).message });
          this.logger?.warn({ ...entry, err }, 'whitelist entry could not be removed');
          continue;
        }
      }
      await this.forget(entry);
      this.ensured.delete(`${entry.account}\n${entry.productNo}`);
    }
    return report;
  }

  /** Adds the entry unless the platform already lists it; records it as Rotor's when Rotor added it. */
  private async addOwned(entry: WhitelistEntry, facts: ProductFacts): Promise<'added' | 'present'> {
    const listed = async (): Promise<boolean> => (await this.list(entry.account, entry.productNo)).some((x) => sameAddress(x, entry.ip));
    let outcome: 'added' | 'present' = 'present';
    if (!(await listed())) {
      try {
        await this.client.call('AddIpWhiteList', {
          appUsername: entry.account,
          ip: entry.ip,
          proxyType: facts.proxyType as 104 | 105,
          productNo: entry.productNo,
        });
      } catch (err) {
        // A platform refusing a duplicate (10004) for an address it lists in a spelling not read above: there.
        if (!isPlatformCode(err, CODE.INVALID_PARAMS) || !(await listed())) throw err;
        this.ensured.add(`${entry.account}\n${entry.productNo}`);
        return 'present';
      }
      const owned = await this.added();
      if (!owned.some((o) => same(o, entry))) await this.store.kvSet(ADDED_KEY, [...owned, entry]);
      outcome = 'added';
      this.logger?.info(entry, 'egress address added to the whitelist');
    }
    this.ensured.add(`${entry.account}\n${entry.productNo}`);
    return outcome;
  }

  private async forget(entry: WhitelistEntry): Promise<void> {
    const owned = await this.added();
    const rest = owned.filter((o) => !same(o, entry));
    if (rest.length !== owned.length) await this.store.kvSet(ADDED_KEY, rest);
  }

  private async facts(productNo: string): Promise<ProductFacts> {
    const facts = await this.products.facts(productNo);
    if (!facts.dynamic) throw new AccountsError('NOT_SUPPORTED', `product ${productNo} is not a dynamic product`);
    return facts;
  }

  /** Whitelist changes run one at a time (the record in the kv is read-modify-write). */
  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => undefined);
    return next;
  }
}

/** Learns the egress address from a URL that answers with the caller's IP as text (e.g. an "what is my IP" service). */
export function fetchEgressIp(url: string, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const transport = url.startsWith('https:') ? https : http;
    const req = transport.get(url, { timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
        if (body.length > 1024) req.destroy(new Error('answer too long'));
      });
      res.on('end', () => {
        const ip = body.trim();
        if ((res.statusCode ?? 0) >= 400 || !isIP(ip))
          reject(new AccountsError('EGRESS_UNKNOWN', `${new URL(url).host} did not answer with an IP address`));
        else resolve(ip);
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (err) =>
      reject(new AccountsError('EGRESS_UNKNOWN', `cannot learn the egress address: ${err.message}`, { cause: err })),
    );
  });
}

/**
 * The platform's listed address and Rotor's are one address: the seed shows the list as plain strings (4.17), and a
 * platform may write `127.0.0.1/32` or an IPv6 address in another spelling (`0:0:0:0:0:0:0:1`, upper case).
 */
export function sameAddress(listed: string, ip: string): boolean {
  const a = canonicalIp(listed);
  return a !== undefined && a === canonicalIp(ip);
}

function canonicalIp(text: string): string | undefined {
  let t = text.trim();
  const slash = t.indexOf('/');
  if (slash >= 0) {
    const bits = t.slice(slash + 1);
    t = t.slice(0, slash);
    if (!((isIP(t) === 4 && bits === '32') || (isIP(t) === 6 && bits === '128'))) return undefined;
  }
  if (t.startsWith('[') && t.endsWith(']')) t = t.slice(1, -1);
  const family = isIP(t);
  if (family === 4) return t;
  if (family !== 6) return undefined;
  return new URL(`http://[${t}]/`).hostname;
}
