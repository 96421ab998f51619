// The flow-use log (ProxyFlowUseLog: bytes, paged, the last 7 days by default) and traffic return
// (DynamicProxyReturn: whole MB or IPs back for money), as the admin API calls them.
//
// Times: the seed gives the format `YYYY-MM-DD HH:MM:SS` and no time zone. Rotor writes them in UTC unless
// told an offset (`utcOffsetMinutes`, e.g. 480 for a platform on China time), and always sends the range
// explicitly so the answer can say which range it covers.
import type { PlatformClient } from '../platform/client.ts';
import type { ProductCatalog } from '../accounting/products.ts';
import { checkWholeAmount } from '../accounting/units.ts';
import { AccountsError } from './errors.ts';

export const FLOW_LOG_DEFAULT_DAYS = 7;
export const FLOW_LOG_MAX_PAGE_SIZE = 100;
const DAY_MS = 86_400_000;

export interface FlowLogQuery {
  account: string;
  productNo: string;
  /** `YYYY-MM-DD HH:MM:SS`; default now - 7 days */
  startTime?: string;
  /** default: the end of the current day */
  endTime?: string;
  page?: number;
  pageSize?: number;
}

export interface FlowLogEntry {
  usedBytes: number;
  totalBytes: number | undefined;
  balanceBytes: number | undefined;
  /** epoch seconds (the seed's `usedTime`) */
  time: number | undefined;
  productNo: string | undefined;
}

export interface FlowLogPage {
  account: string;
  productNo: string;
  startTime: string;
  endTime: string;
  page: number;
  pageSize: number;
  total: number;
  entries: FlowLogEntry[];
}

export interface TrafficReturn {
  account: string;
  productNo: string;
  /** whole MB (traffic products) */
  flowNum?: number;
  /** whole IPs (IP-count products) */
  ipNum?: number;
  remark?: string;
}

export interface TrafficOptions {
  client: Pick<PlatformClient, 'call'>;
  products: ProductCatalog;
  /** Offset of the platform's clock from UTC for log times; default 0. */
  utcOffsetMinutes?: number;
  now?: () => number;
  /** Called after a successful return (e.g. BalanceWatcher.nudge). */
  onReturned?: (account: string, productNo: string) => void;
}

export class Traffic {
  private readonly client: Pick<PlatformClient, 'call'>;
  private readonly products: ProductCatalog;
  private readonly offsetMs: number;
  private readonly now: () => number;
  private readonly onReturned: ((account: string, productNo: string) => void) | undefined;

  constructor(options: TrafficOptions) {
    this.client = options.client;
    this.products = options.products;
    this.offsetMs = (options.utcOffsetMinutes ?? 0) * 60_000;
    this.now = options.now ?? Date.now;
    this.onReturned = options.onReturned;
  }

  /** Formats epoch ms as the platform's `YYYY-MM-DD HH:MM:SS`. */
  formatTime(ms: number): string {
    return new Date(ms + this.offsetMs).toISOString().slice(0, 19).replace('T', ' ');
  }

  /** One page of the flow-use log. */
  async flowLog(query: FlowLogQuery): Promise<FlowLogPage> {
    const page = query.page ?? 1;
    const pageSize = query.pageSize ?? 10;
    if (!Number.isInteger(page) || page < 1) throw new AccountsError('INVALID_INPUT', 'page must be a whole number >= 1');
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > FLOW_LOG_MAX_PAGE_SIZE) {
      throw new AccountsError('INVALID_INPUT', `pageSize must be a whole number from 1 to ${FLOW_LOG_MAX_PAGE_SIZE}`);
    }
    const facts = await this.products.facts(query.productNo);
    if (!facts.flowLog) throw new AccountsError('NOT_SUPPORTED', `product ${query.productNo} has no flow-use log`);
    const now = this.now();
    const local = now + this.offsetMs;
    const endOfDay = Math.floor(local / DAY_MS) * DAY_MS + DAY_MS - 1000 - this.offsetMs;
    const startTime = query.startTime ?? this.formatTime(now - FLOW_LOG_DEFAULT_DAYS * DAY_MS);
    const endTime = query.endTime ?? this.formatTime(endOfDay);
    const answer = await this.client.call('ProxyFlowUseLog', {
      appUsername: query.account,
      productNo: query.productNo,
      startTime,
      endTime,
      page,
      pageSize,
    });
    return {
      account: query.account,
      productNo: query.productNo,
      startTime,
      endTime,
      page: answer.curPage ?? page,
      pageSize,
      total: answer.total ?? 0,
      entries: (answer.list ?? []).map((e) => ({
        usedBytes: e.used,
        totalBytes: e.total ?? undefined,
        balanceBytes: e.balance ?? undefined,
        time: e.usedTime ?? undefined,
        productNo: e.productNo ?? undefined,
      })),
    };
  }

  /** Every page of the range (follows `total`), at most `maxPages` pages of 100. */
  async flowLogAll(query: Omit<FlowLogQuery, 'page' | 'pageSize'>, maxPages = 100): Promise<FlowLogPage> {
    const first = await this.flowLog({ ...query, page: 1, pageSize: FLOW_LOG_MAX_PAGE_SIZE });
    const range = { ...query, startTime: first.startTime, endTime: first.endTime };
    const entries = [...first.entries];
    for (let page = 2; entries.length < first.total && page <= maxPages; page++) {
      const next = await this.flowLog({ ...range, page, pageSize: FLOW_LOG_MAX_PAGE_SIZE });
      if (next.entries.length === 0) break;
      entries.push(...next.entries);
    }
    return { ...first, page: 1, pageSize: entries.length, entries };
  }

  /** Returns traffic (flowNum, whole MB) or IPs (ipNum) to the platform; resolves with the refund. */
  async returnTraffic(req: TrafficReturn): Promise<{ returnAmount: number | undefined }> {
    const facts = await this.products.facts(req.productNo);
    if (!facts.dynamic) throw new AccountsError('NOT_SUPPORTED', `product ${req.productNo} is not a dynamic product`);
    if (facts.byIpCount) {
      if (req.ipNum === undefined) throw new AccountsError('INVALID_INPUT', 'ipNum is required for a product sold by IP count');
      checkWholeAmount(req.ipNum, 'ipNum');
    } else {
      if (req.flowNum === undefined)
        throw new AccountsError('INVALID_INPUT', 'flowNum (whole MB) is required for a product sold by traffic');
      checkWholeAmount(req.flowNum, 'flowNum');
    }
    if (req.remark !== undefined && req.remark.length > 250)
      throw new AccountsError('INVALID_INPUT', 'remark must be at most 250 characters');
    const answer = await this.client.call('DynamicProxyReturn', {
      appUsername: req.account,
      proxyType: facts.proxyType as 104 | 105,
      productNo: req.productNo,
      ...(facts.byIpCount ? { ipNum: req.ipNum } : { flowNum: req.flowNum }),
      ...(req.remark !== undefined ? { remark: req.remark } : {}),
    });
    this.onReturned?.(req.account, req.productNo);
    return { returnAmount: answer.returnAmount ?? undefined };
  }
}
