// Everything the sandbox platform remembers, in memory, in one place. Handlers in orders.ts, accounts.ts and
// draws.ts read and change it; inspect.ts snapshots it for tests.
import { createCatalog, type SimProduct } from './catalog.ts';
import { parseMoney } from './money.ts';
import { seededRandom } from './random.ts';

export interface Merchant {
  appName: string;
  /** money in ten-thousandths (money.ts) */
  coin: number;
  credit: number;
  useBridge: number;
  callbackUrl: string;
  status: number;
  /** capabilities the operator enables per merchant (seed 5: after-sale, change proxy) */
  afterSale: boolean;
  changeProxy: boolean;
}

export type OrderKind = 'open' | 'renew' | 'release' | 'aftersale' | 'change';
export const ORDER_TYPE: Record<OrderKind, number> = { open: 1, renew: 2, release: 3, aftersale: 3, change: 5 };

/** One line of an order: the instance it concerns and what it cost (refunded if the line fails). */
export interface OrderLine {
  instanceNo: string;
  amount: number;
  /** renew: periods bought; open: periods of the new instance */
  cycleTimes: number;
  ok?: boolean;
}

export interface Order {
  orderNo: string;
  appOrderNo: string;
  kind: OrderKind;
  status: number;
  amount: number;
  refunded: number;
  lines: OrderLine[];
  createdAt: number;
  /** the first answer, returned again for a repeated merchant number */
  accepted: Record<string, unknown>;
  /** canonical request, to tell a repeat from a different request under the same number */
  fingerprint: string;
}

export interface Instance {
  instanceNo: string;
  orderNo: string;
  productNo: string;
  proxyType: number;
  protocol: string;
  ip: string;
  port: number;
  username: string;
  pwd: string;
  countryCode: string;
  cityCode: string;
  useType: string;
  asnType: number;
  /** epoch seconds; 0 = unlimited */
  userExpired: number;
  status: number;
  openAt: number;
  renewAt: number;
  releaseAt: number;
  projectId: string;
  /** the public exit address the platform assigned (from a segment, or the specified IP) */
  extendIp: string;
  cycleTimes: number;
  extBandWidth: number;
  /** dynamic packages: MB (traffic) or IP count */
  flowTotal: number;
  dynamic: boolean;
  mainAccount: string;
  /** a change order in progress */
  changing: string | null;
  /** cancels the pending expiry check (lifecycle.ts) */
  unwatch?: () => void;
}

export interface FlowBucket {
  /** epoch seconds of the minute */
  minute: number;
  used: number;
  total: number;
  balance: number;
}

/** A main account's holding in one dynamic product. */
export interface Balance {
  productNo: string;
  /** bytes bought (traffic products) */
  totalBytes: number;
  usedBytes: number;
  /** IP-count products */
  ipTotal: number;
  ipUsed: number;
  whitelist: string[];
  log: FlowBucket[];
}

export interface MainAccount {
  appUsername: string;
  username: string;
  password: string;
  status: number;
  authStatus: number;
  phone: string;
  email: string;
  authName: string;
  balances: Map<string, Balance>;
}

export interface SubAccount {
  appUsername: string;
  username: string;
  password: string;
  status: number;
  authStatus: number;
  main: string;
  remark: string;
  /** limit given at creation, MB (≤ 0 = unlimited); applied per product with that product's base */
  limitMb: number;
  /** per product: limit in bytes set by SetProxyUserFlowLimit (-1 = unlimited) */
  limits: Map<string, number>;
  /** per product: bytes used */
  used: Map<string, number>;
}

export interface Charge {
  merchantNo: string;
  operation: string;
  orderNo: string;
  /** positive = charged, negative = refunded (ten-thousandths) */
  amount: number;
  at: number;
}

export interface ResetRecord {
  resetNo: string;
  instances: string[];
  answer: Record<string, unknown>;
}

export interface ExtractToken {
  account: string;
  productNo: string;
  num: number;
  protocol: string;
  returnType: string;
  delimiter: number;
  addressCode: string;
  /** a DrawByPwd link (shape 'link'): the drawn lines, served as they are */
  lines?: string[];
}

/**
 * A retried reqId's first answer, kept with the state (replays.ts, persist.ts): so a sandbox restarted between a
 * call and its retry answers the retry instead of processing it again.
 */
export interface RememberedReply {
  /** SHA-256 (base64) of the operation name and the params ciphertext as sent: a retry carries the same */
  request: string;
  /** the reply as first sent */
  reply: { reqId: string; code: number; msg: string; data?: string };
  /** real time (epoch ms) of the first answer */
  at: number;
}

/** Remembered reqIds kept with the state: the newest this many, each this long (real time). */
export const REMEMBERED_REPLIES_MAX = 10_000;
export const REMEMBERED_REPLIES_TTL_MS = 10 * 60_000;

export class SimState {
  merchant: Merchant;
  products: Map<string, SimProduct>;
  orders = new Map<string, Order>();
  /** merchant number → platform order number, per business (open, renew, release, aftersale, change) */
  merchantNos = new Map<string, { kind: OrderKind; orderNo: string }>();
  instances = new Map<string, Instance>();
  mains = new Map<string, MainAccount>();
  subs = new Map<string, SubAccount>();
  charges: Charge[] = [];
  resets = new Map<string, ResetRecord>();
  extractTokens = new Map<string, ExtractToken>();
  /** specified IPs already sold */
  soldIps = new Set<string>();
  /** bytes relayed through each static instance */
  instanceBytes = new Map<string, number>();
  /** reqId → its first answer, oldest first (bounded by rememberReply) */
  replies = new Map<string, RememberedReply>();
  private counter = 0;
  /** Ids up to this may be handed out; past it `reserve` is asked first (persist.ts writes the new ceiling ahead). */
  private reservedUpTo = Number.POSITIVE_INFINITY;
  private reserve: ((next: number) => number) | undefined;
  private rand: () => number;
  /**
   * Bumped by every change of what persist.ts saves (the server after an operation that writes, the traffic
   * meters, the order and expiry timers, the test controls): the file is rewritten only when it moved.
   */
  revision = 0;

  constructor(seed: number, callbackUrl: string) {
    this.merchant = {
      appName: 'Rotor Sandbox',
      coin: parseMoney('10000'),
      credit: parseMoney('500'),
      useBridge: 1,
      callbackUrl,
      status: 1,
      afterSale: true,
      changeProxy: true,
    };
    this.products = new Map(createCatalog().map((p) => [p.productNo, p]));
    this.rand = seededRandom(seed);
  }

  /** Deterministic per seed: ids and generated credentials repeat across runs with the same seed. */
  random(): number {
    return this.rand();
  }

  token(length: number, alphabet = 'abcdefghijkmnpqrstuvwxyz23456789'): string {
    let s = '';
    for (let i = 0; i < length; i++) s += alphabet[Math.floor(this.rand() * alphabet.length)];
    return s;
  }

  /** What persist.ts saves besides the maps: the id counter. */
  get idCounter(): number {
    return this.counter;
  }

  /**
   * After a reload (persist.ts): ids continue from the saved counter, and generated names draw from a new
   * sequence (the seed's would repeat names the saved accounts already hold).
   */
  resume(counter: number, generation: number): void {
    this.counter = Math.max(this.counter, counter);
    this.rand = seededRandom(Math.imul(generation + 1, 0x9e3779b1) ^ this.counter);
  }

  /** Marks the state changed (see `revision`). */
  touch(): void {
    this.revision++;
  }

  /**
   * Ids are handed out only below a ceiling recorded durably ahead of them (persist.ts): `reserve(next)` is
   * called when `next` passes the ceiling and answers the new one. A sandbox killed before its state file was
   * written resumes above every id it may have handed out, so no platform number is ever given twice.
   */
  reserveIdsWith(reserve: (next: number) => number, upTo: number): void {
    this.reserve = reserve;
    this.reservedUpTo = upTo;
  }

  nextId(prefix: string): string {
    this.revision++;
    const next = this.counter + 1;
    if (next > this.reservedUpTo && this.reserve) this.reservedUpTo = this.reserve(next);
    this.counter = next;
    return `${prefix}${String(this.counter).padStart(8, '0')}`;
  }

  /**
   * Keeps a handled reqId's answer with the state, in the same turn as the change it answers (the state file
   * then holds both or neither); drops the oldest past REMEMBERED_REPLIES_MAX or REMEMBERED_REPLIES_TTL_MS.
   */
  rememberReply(reqId: string, remembered: RememberedReply): void {
    this.revision++;
    this.replies.delete(reqId);
    this.replies.set(reqId, remembered);
    for (const [id, r] of this.replies) {
      if (this.replies.size <= REMEMBERED_REPLIES_MAX && remembered.at - r.at < REMEMBERED_REPLIES_TTL_MS) break;
      this.replies.delete(id);
    }
  }

  product(productNo: string): SimProduct | undefined {
    const p = this.products.get(productNo);
    return p && p.authorized ? p : undefined;
  }

  /** Money the merchant can still spend: balance plus credit line. */
  spendable(): number {
    return this.merchant.coin + this.merchant.credit;
  }

  charge(merchantNo: string, operation: string, orderNo: string, amount: number, at: number): void {
    if (amount === 0) return;
    this.revision++;
    this.merchant.coin -= amount;
    this.charges.push({ merchantNo, operation, orderNo, amount, at });
  }
}
