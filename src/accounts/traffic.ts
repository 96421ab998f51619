// The flow-use log (ProxyFlowUseLog: bytes, paged, the last 7 days by default) and traffic return
// (DynamicProxyReturn: whole MB or IPs back for money), as the admin API calls them. A return is never sent
// twice blindly: see returnTraffic.
//
// Times: the seed gives the format `YYYY-MM-DD HH:MM:SS` and no time zone (`usedTime` in the answer is epoch
// seconds). Rotor writes them in UTC unless told the platform's zone (config `platform.timeZone`: an IANA zone
// such as Asia/Shanghai, or a fixed offset such as +08:00 — a mainland platform reading them on China time), and
// always sends the range explicitly so the answer can say which range it covers.
import type { PlatformClient } from '../platform/client.ts';
import { balanceEntry } from '../platform/balance-entry.ts';
import { CODE } from '../platform/codes.ts';
import {
  DecryptReplyError,
  EmptyReplyError,
  PlatformError,
  RequestInvalidError,
  ResponseInvalidError,
  neverReached,
} from '../platform/errors.ts';
import type { ProductCatalog, ProductFacts } from '../accounting/products.ts';
import type { Logger } from '../telemetry/logger.ts';
import { checkWholeAmount } from '../accounting/units.ts';
import { AccountsError } from './errors.ts';

export const FLOW_LOG_DEFAULT_DAYS = 7;
export const FLOW_LOG_MAX_PAGE_SIZE = 100;
/** Pages flowLogAll reads at most (of FLOW_LOG_MAX_PAGE_SIZE entries). */
export const FLOW_LOG_MAX_PAGES = 1000;
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
  /** The platform's zone for log times: an IANA zone or a fixed offset `±HH:MM`; wins over utcOffsetMinutes. */
  timeZone?: string;
  now?: () => number;
  /** Called after a successful return (e.g. BalanceWatcher.nudge). */
  onReturned?: (account: string, productNo: string) => void;
  logger?: Logger;
}

/** What a return answers: the refund when the platform said it; `confirmedBy` when its reply was lost and the balance showed the return. */
export interface TrafficReturned {
  returnAmount: number | undefined;
  confirmedBy?: 'balance';
}

export class Traffic {
  private readonly client: Pick<PlatformClient, 'call'>;
  private readonly products: ProductCatalog;
  private readonly wall: (ms: number) => string;
  private readonly now: () => number;
  private readonly onReturned: ((account: string, productNo: string) => void) | undefined;
  private readonly logger: Logger | undefined;
  /** The return in progress per `account\nproduct` (its end), so the next waits for it. */
  private readonly returning = new Map<string, Promise<void>>();

  constructor(options: TrafficOptions) {
    this.client = options.client;
    this.products = options.products;
    this.wall = wallClock(options.timeZone ?? options.utcOffsetMinutes ?? 0);
    this.now = options.now ?? Date.now;
    this.onReturned = options.onReturned;
    this.logger = options.logger;
  }

  /** Formats epoch ms as the platform's `YYYY-MM-DD HH:MM:SS`. */
  formatTime(ms: number): string {
    return this.wall(ms);
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
    const startTime = query.startTime ?? this.formatTime(now - FLOW_LOG_DEFAULT_DAYS * DAY_MS);
    // The end of the platform's current day, on its own clock.
    const endTime = query.endTime ?? `${this.formatTime(now).slice(0, 10)} 23:59:59`;
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

  /**
   * Every page of the range (follows `total`). A log longer than `maxPages` pages of 100 (default 1,000:
   * 100,000 entries, about 69 days of one entry a minute) is refused before it is read (FLOW_LOG_TOO_LONG,
   * 422: ask for a shorter window), never answered cut short as if it were the whole.
   */
  async flowLogAll(query: Omit<FlowLogQuery, 'page' | 'pageSize'>, maxPages = FLOW_LOG_MAX_PAGES): Promise<FlowLogPage> {
    const first = await this.flowLog({ ...query, page: 1, pageSize: FLOW_LOG_MAX_PAGE_SIZE });
    if (first.total > maxPages * FLOW_LOG_MAX_PAGE_SIZE) {
      throw new AccountsError(
        'FLOW_LOG_TOO_LONG',
        `the flow-use log of ${query.account} (${query.productNo}) from ${first.startTime} to ${first.endTime} has ${first.total} ` +
          `entries, more than the ${maxPages * FLOW_LOG_MAX_PAGE_SIZE} read at once: ask for a shorter window`,
      );
    }
    const range = { ...query, startTime: first.startTime, endTime: first.endTime };
    const entries = [...first.entries];
    for (let page = 2; entries.length < first.total && page <= maxPages; page++) {
      const next = await this.flowLog({ ...range, page, pageSize: FLOW_LOG_MAX_PAGE_SIZE });
      if (next.entries.length === 0) break;
      entries.push(...next.entries);
    }
    return { ...first, page: 1, pageSize: entries.length, entries };
  }

  /**
   * Returns traffic (flowNum, whole MB) or IPs (ipNum) to the platform; resolves with the refund. One return
   * per (account, product) at a time, so the balance read around it is this return's alone.
   *
   * DynamicProxyReturn moves money every time the platform processes it and carries no merchant number; the
   * seed asks for the same reqId on a retry but does not say a platform recognises it. So it is never resent
   * blindly: the client resends it only when the request never reached the platform (refused, DNS, HTTP 429).
   * When the outcome is unknown (no answer, a reply cut off, HTTP 5xx, code 500) the balance tells: the
   * product's `total` (MB; `ipTotal` for IP-count products) read before and after — lower by exactly the
   * amount: returned (`returnAmount` unknown, `confirmedBy: 'balance'`); anything else, unchanged included:
   * RETURN_OUTCOME_UNKNOWN (503) with what the balance showed, naming the balance to read before returning
   * again. Never sent again by Rotor: right under either reading of reqId (a platform that answers a resent
   * reqId with its first answer, or one that processes it again), and with another daemon of a fleet (or an
   * order) moving the same balance meanwhile, which the per-process order of returns cannot see.
   */
  async returnTraffic(req: TrafficReturn): Promise<TrafficReturned> {
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
    const key = `${req.account}\n${req.productNo}`;
    const previous = this.returning.get(key) ?? Promise.resolve();
    const mine = previous.then(() => this.returnOnce(req, facts));
    const tail = mine.then(noop, noop);
    this.returning.set(key, tail);
    void tail.then(() => {
      if (this.returning.get(key) === tail) this.returning.delete(key);
    });
    return mine;
  }

  private async returnOnce(req: TrafficReturn, facts: ProductFacts): Promise<TrafficReturned> {
    const asked = (facts.byIpCount ? req.ipNum : req.flowNum) ?? 0;
    const unit = facts.byIpCount ? 'IPs' : 'MB';
    const field = facts.byIpCount ? 'ipTotal' : 'total';
    const params = {
      appUsername: req.account,
      proxyType: facts.proxyType as 104 | 105,
      productNo: req.productNo,
      ...(facts.byIpCount ? { ipNum: req.ipNum } : { flowNum: req.flowNum }),
      ...(req.remark !== undefined ? { remark: req.remark } : {}),
    };
    const what = `the return of ${asked} ${unit} of ${req.productNo} to ${req.account}`;
    const check = `read GET /v1/accounts/${req.account}/balance?productNo=${req.productNo} (its ${field}) before returning again`;
    // Read before sending: nothing is sent when the balance cannot be read.
    const before = await this.returnedAmount(req.account, req.productNo, facts);
    try {
      const answer = await this.client.call('DynamicProxyReturn', params);
      this.onReturned?.(req.account, req.productNo);
      return { returnAmount: answer.returnAmount ?? undefined };
    } catch (err) {
      // The platform answered 200: done, whatever its data said (the seed makes returnAmount optional).
      if (err instanceof EmptyReplyError || err instanceof ResponseInvalidError || err instanceof DecryptReplyError) {
        this.onReturned?.(req.account, req.productNo);
        return { returnAmount: undefined };
      }
      // Refused (10081, bad parameters), or it never reached the platform: nothing was returned.
      if (err instanceof RequestInvalidError || (err instanceof PlatformError && err.platformCode !== CODE.SYSTEM) || neverReached(err)) {
        throw err;
      }
      let after: number | undefined;
      try {
        after = await this.returnedAmount(req.account, req.productNo, facts);
      } catch {
        after = undefined;
      }
      const said = err instanceof PlatformError ? `the platform answered ${err.platformCode}` : `no answer (${(err as Error).message})`;
      if (before !== undefined && after === before - asked) {
        this.onReturned?.(req.account, req.productNo);
        this.logger?.warn(
          { account: req.account, productNo: req.productNo, asked, [field]: after, err },
          `${what}: ${said}; the balance shows it done`,
        );
        return { returnAmount: undefined, confirmedBy: 'balance' };
      }
      const seen =
        before === undefined || after === undefined
          ? `the balance's ${field} could not be compared (${before ?? 'unknown'} ${unit} before, ${after ?? 'unknown'} now)`
          : after === before
            ? `the balance's ${field} is ${after} ${unit} as before (not done, unless something else moved it meanwhile)`
            : `the balance's ${field} was ${before} ${unit} before and is ${after} ${unit} now`;
      throw new AccountsError('RETURN_OUTCOME_UNKNOWN', `${what}: ${said}; ${seen}; ${check}`, { cause: err });
    }
  }

  /** The product's `total` (MB) or, sold by IP count, `ipTotal` as ProxyInfo shows it: what a return lowers. */
  private async returnedAmount(account: string, productNo: string, facts: ProductFacts): Promise<number | undefined> {
    const info = await this.client.call('ProxyInfo', { appUsername: account, proxyType: facts.proxyType as 104 | 105, productNo });
    // Only this product's entry (or the one entry of an answer that names no product): never another's total.
    const entry = balanceEntry(info.list, productNo);
    const v = facts.byIpCount ? entry?.ipTotal : entry?.total;
    return v === undefined || v === null || !Number.isFinite(Number(v)) ? undefined : Number(v);
  }
}

function noop(): void {}

const FIXED_OFFSET = /^([+-])(\d{2}):?(\d{2})$/;

/** `YYYY-MM-DD HH:MM:SS` of an instant on a zone's clock (IANA, `±HH:MM`, or minutes east of UTC). */
function wallClock(zone: string | number): (ms: number) => string {
  const iso = (ms: number): string => new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
  const m = typeof zone === 'string' ? FIXED_OFFSET.exec(zone) : null;
  const minutes =
    typeof zone === 'number' ? zone : m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) : zone === 'UTC' ? 0 : undefined;
  if (minutes !== undefined) return (ms) => iso(ms + minutes * 60_000);
  const f = new Intl.DateTimeFormat('en-US', {
    timeZone: zone as string,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  return (ms) => {
    const p: Record<string, string> = {};
    for (const part of f.formatToParts(new Date(ms))) p[part.type] = part.value;
    return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}`;
  };
}
