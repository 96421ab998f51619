// The static-order surface as the admin routes and the gateway see it: one facade (Orders) over the catalogue,
// the placer (journaled merchant numbers), the tracker (callbacks + polling) and the callback handler.
import { PlatformError } from '../platform/errors.ts';
import { CODE } from '../platform/codes.ts';
import type { OpRequest, OpResponse } from '../platform/operations.ts';
import type { UpstreamNode, UpstreamProtocol } from '../pool/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import {
  UNRESOLVED_STATES,
  type InstanceFilter,
  type InstanceRecord,
  type OrderFilter,
  type OrderRecord,
  type OrdersBackend,
} from '../store/types.ts';
import { CallbackHandler, type CallbackAnswer } from './callbacks.ts';
import { Catalog } from './catalog.ts';
import { realClock, type OrdersClock } from './clock.ts';
import { OrderError } from './errors.ts';
import {
  Placer,
  type AfterSaleInput,
  type AssignIpInput,
  type ChangeInput,
  type OpenInput,
  type ReleaseInput,
  type RenewInput,
  type ResetInput,
  type ResetOutcome,
  type ResumeReport,
} from './placer.ts';
import { instancesOfOrder } from './records.ts';
import { Tracker, type TrackerSettings } from './tracker.ts';
import {
  INSTANCE_STATUS,
  instanceView,
  orderView,
  type InstanceView,
  type OrderClaims,
  type OrderView,
  type PlatformCaller,
} from './types.ts';

type OpenItem = OpRequest<'InstanceOpen'>['params'][number];
/** `{params:[…]}` or, for one item, the item's fields at the top level (docs/reference.md). */
export type OpenBody = OpenInput | (OpenItem & { appOrderNo?: string });

export interface OrdersOptions {
  client: PlatformCaller;
  store: OrdersBackend;
  metrics?: Metrics;
  logger?: Logger;
  clock?: OrdersClock;
  /** Catalogue cache lifetime; default 10 minutes. */
  catalogTtlMs?: number;
  tracking?: TrackerSettings;
  /** Fleet mode: one daemon at a time follows a given order (see tracker.ts). */
  claims?: OrderClaims;
  /** Stores an order that just became final, with its order.final event: see tracker.ts TrackerOptions.storeFinal. */
  storeFinalOrder?: (order: OrderRecord) => Promise<void>;
  newMerchantNo?: (now: number) => string;
  newReqId?: () => string;
}

const PROTOCOL: Record<string, UpstreamProtocol> = { '1': 'socks5', '2': 'http' };

export class Orders {
  readonly catalog: Catalog;
  readonly placer: Placer;
  readonly tracker: Tracker;
  readonly callbacks: CallbackHandler;
  private readonly client: PlatformCaller;
  private readonly store: OrdersBackend;
  private readonly logger: Logger | undefined;
  private readonly clock: OrdersClock;

  constructor(options: OrdersOptions) {
    const clock = options.clock ?? realClock;
    this.clock = clock;
    const now = () => clock.now();
    this.client = options.client;
    this.store = options.store;
    this.logger = options.logger;
    this.catalog = new Catalog({ client: options.client, ttlMs: options.catalogTtlMs, logger: options.logger, now });
    this.placer = new Placer({
      client: options.client,
      store: options.store,
      catalog: this.catalog,
      logger: options.logger,
      now,
      newMerchantNo: options.newMerchantNo,
      newReqId: options.newReqId,
    });
    this.tracker = new Tracker({
      ...options.tracking,
      client: options.client,
      store: options.store,
      catalog: this.catalog,
      placer: this.placer,
      metrics: options.metrics,
      logger: options.logger,
      clock,
      ...(options.claims ? { claims: options.claims } : {}),
      ...(options.storeFinalOrder ? { storeFinal: options.storeFinalOrder } : {}),
    });
    this.callbacks = new CallbackHandler({
      store: options.store,
      tracker: this.tracker,
      metrics: options.metrics,
      logger: options.logger,
      clock,
      isKnownProduct: (no) => this.catalog.isAuthorized(no) !== undefined,
    });
    this.placer.onAccepted = (order) => {
      this.tracker.follow(order);
      void this.tracker.updateGauges().catch(() => undefined);
    };
    this.placer.onUnknown = () => undefined; // the tracker's sweep resends unknown intents
    this.placer.onResetPending = (resetNo) => this.tracker.followReset(resetNo);
    this.placer.onResetUnread = (instanceNos) =>
      void this.tracker
        .refreshInstances(instanceNos)
        .catch((err: unknown) => options.logger?.warn({ instanceNos, err }, 'reading the instances of a password reset failed'));
    this.placer.storeFinal = options.storeFinalOrder;
  }

  /** Resumes unknown intents, follows open orders, replays unprocessed callbacks, starts the timers. */
  async start(): Promise<void> {
    await this.tracker.start();
  }

  /** Stops the timers and waits for work in progress. The store is the caller's to close. */
  async stop(): Promise<void> {
    await this.tracker.stop();
  }

  // ── placing ──
  async open(body: OpenBody): Promise<OrderView> {
    const input: OpenInput =
      'params' in body && Array.isArray(body.params)
        ? (body as OpenInput)
        : (() => {
            const { appOrderNo, ...item } = body as OpenItem & { appOrderNo?: string };
            return appOrderNo === undefined ? { params: [item] } : { appOrderNo, params: [item] };
          })();
    return this.view(await this.placer.open(input));
  }

  async renew(input: RenewInput): Promise<OrderView> {
    return this.view(await this.placer.renew(input));
  }

  async release(input: ReleaseInput): Promise<OrderView> {
    return this.view(await this.placer.release(input));
  }

  async afterSale(input: AfterSaleInput): Promise<OrderView> {
    return this.view(await this.placer.afterSale(input));
  }

  async checkAssignIp(ip: string): Promise<OpResponse<'GetAssignIpInfo'>> {
    return this.placer.checkAssignIp(ip);
  }

  async assignIp(input: AssignIpInput): Promise<OrderView> {
    return this.view(await this.placer.assignIp(input));
  }

  async change(instanceNo: string, input: Omit<ChangeInput, 'instanceNo'> = {}): Promise<OrderView> {
    return this.view(await this.placer.change({ ...input, instanceNo }));
  }

  async resetPassword(input: ResetInput): Promise<ResetOutcome> {
    return this.placer.resetPassword(input);
  }

  /** Re-sends every intent whose outcome is unknown (start() does it too). */
  async resumeIntents(): Promise<ResumeReport> {
    return this.placer.resumeIntents();
  }

  // ── reading ──
  async listOrders(filter: OrderFilter = {}): Promise<OrderView[]> {
    return (await this.store.listOrders(filter)).map((o) => orderView(o));
  }

  /** One order by platform or merchant number, read again from the platform (the local record if it is unreachable). */
  async getOrder(no: string): Promise<OrderView> {
    let order: OrderRecord | undefined;
    try {
      order = await this.tracker.refreshOrder(no);
    } catch (err) {
      if (err instanceof PlatformError && err.platformCode !== CODE.SYSTEM) throw err;
      order = await this.store.getOrder(no);
      if (!order) throw err;
      this.logger?.warn({ no, err }, 'platform unreachable; answering the local order record');
    }
    if (!order) {
      const journal = await this.store.getJournal(no);
      if (journal && (UNRESOLVED_STATES as string[]).includes(journal.state)) {
        throw new OrderError('ORDER_OUTCOME_UNKNOWN', `order ${no} was sent but the platform has not confirmed it yet`, { merchantNo: no });
      }
      throw new OrderError('ORDER_NOT_FOUND', `no order ${no}`);
    }
    return this.view(order);
  }

  async listInstances(filter: InstanceFilter = {}): Promise<InstanceView[]> {
    return (await this.store.listInstances(filter)).map((i) => instanceView(i));
  }

  /** One instance from the store; `refresh` reads it from the platform first; `reveal` includes the password. */
  async getInstance(instanceNo: string, options: { refresh?: boolean; reveal?: boolean } = {}): Promise<InstanceView> {
    if (options.refresh) await this.tracker.refreshInstances([instanceNo]);
    const inst = await this.store.getInstance(instanceNo);
    if (!inst) throw new OrderError('INSTANCE_NOT_FOUND', `no instance ${instanceNo}`);
    return instanceView(inst, options.reveal);
  }

  /** The callback route's handler (mounted by the admin component at config callback.path). */
  handleCallback(query: Record<string, unknown> | URLSearchParams): Promise<CallbackAnswer> {
    return this.callbacks.handle(query);
  }

  /**
   * The upstream behind a running static instance, for `-instance-<instanceNo>`; undefined when the instance
   * is unknown, not running, expired, or speaks no protocol the gateway dials (socks5 preferred, then http).
   */
  async instanceNode(instanceNo: string, nowMs: number = this.clock.now()): Promise<UpstreamNode | undefined> {
    const inst = await this.store.getInstance(instanceNo);
    return inst ? nodeOf(inst, nowMs) : undefined;
  }

  private async view(order: OrderRecord): Promise<OrderView> {
    const instances: InstanceRecord[] = [];
    if (order.type === 1 && order.orderNo) instances.push(...(await this.store.listInstances({ orderNo: order.orderNo })));
    else {
      for (const no of instancesOfOrder(order)) {
        const i = await this.store.getInstance(no);
        if (i) instances.push(i);
      }
    }
    return orderView(order, instances);
  }
}

export function nodeOf(inst: InstanceRecord, nowMs: number): UpstreamNode | undefined {
  if (inst.status !== INSTANCE_STATUS.running || !inst.ip || !inst.port) return undefined;
  if (inst.userExpired && inst.userExpired > 0 && inst.userExpired * 1000 <= nowMs) return undefined;
  const codes = (inst.protocol ?? '1').split(',').map((s) => s.trim());
  // 3 = https (part 4): CONNECT over TLS, dialed only when the instance offers neither plain protocol.
  const tls = !codes.includes('1') && !codes.includes('2') && codes.includes('3');
  const protocol = codes.includes('1') ? PROTOCOL['1'] : codes.includes('2') || tls ? PROTOCOL['2'] : undefined;
  if (!protocol) return undefined;
  const host = inst.ip;
  return {
    ...(tls ? { tls: true } : {}),
    id: `${tls ? 'https' : protocol}://${inst.username ?? ''}@${host.includes(':') ? `[${host}]` : host}:${inst.port}`,
    protocol,
    host,
    port: inst.port,
    ...(inst.username ? { username: inst.username } : {}),
    ...(inst.pwd ? { password: inst.pwd } : {}),
    source: 'instance',
    ...(inst.userExpired && inst.userExpired > 0 ? { expiresAt: inst.userExpired * 1000 } : {}),
  };
}
