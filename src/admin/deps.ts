// Everything the admin routes need, as narrow structural interfaces: the real components (PlatformClient,
// Orders and its Catalog, BalanceWatcher, Traffic, Whitelist, Accounting, PoolRegistry, SessionTable, the
// metrics registry) satisfy them as they are, and src/main.ts passes them in. Main-account and sub-account
// routes (CreateUser, UserAuth, CreateProxyUser, GetProxyUserInfo, SetProxyUserFlowLimit) hold no Rotor
// state, so they go to the platform port directly.
import type { OperationName, OpRequest, OpResponse } from '../platform/operations.ts';
import type { CallOptions } from '../platform/client.ts';
import type { AreaNode, City, Product, Project } from '../platform/schemas.ts';
import type { FlowLogQuery, TrafficReturn } from '../accounts/traffic.ts';
import type { BatchResult } from '../users/bulk.ts';
import type { UserListQuery } from '../users/directory.ts';
import type { CreateUserInput, UserPatch, UserView } from '../users/record.ts';
import type { EventRecord } from '../store/events.ts';
import type { ConnectionListQuery, UsageListQuery } from '../connlog/service.ts';
import type { ConnectionRecord, LiveConnection } from '../connlog/types.ts';
import type { PlatformCompareRow, UsageRow } from '../connlog/usage.ts';
import type { AfterSaleInput, AssignIpInput, ChangeInput, OpenInput, ReleaseInput, RenewInput, ResetInput } from '../orders/placer.ts';
import type { MetricSource, StatsView } from '../telemetry/sampler.ts';
import type { Ban } from '../proxy/request-bans.ts';

/** PlatformClient. */
export interface PlatformPort {
  call<N extends OperationName>(name: N, params: OpRequest<N>, options?: CallOptions): Promise<OpResponse<N>>;
  /** Validates against the operation table; UnknownOperationError for a name not in it. */
  callRaw(name: string, params: unknown): Promise<unknown>;
}

/** src/orders/catalog.ts Catalog (dictionaries and products, cached). */
export interface CatalogPort {
  areas(codes?: string[]): Promise<AreaNode[]>;
  cities(codes?: string[]): Promise<City[]>;
  projects(codes?: string[]): Promise<Project[]>;
  products(query?: { proxyType?: number[] }): Promise<Product[]>;
  /** undefined when the merchant is not (or no longer) authorized for it. */
  product(productNo: string, options?: { fresh?: boolean }): Promise<Product | undefined>;
  productAreas(productNo: string, proxyType: 104 | 105): Promise<unknown[]>;
}

/** An order as the routes answer it (OrderRecord and OrderView both fit; extra fields are not sent). */
export interface OrderAnswer {
  orderNo: string | null;
  appOrderNo: string;
  type: number;
  status: number;
  amount: string | null;
}

/** An instance as the routes answer it (password never included). */
export interface InstanceAnswer {
  instanceNo: string;
}

export interface OrderListFilter {
  type?: number;
  statuses?: number[];
  open?: boolean;
  limit?: number;
  offset?: number;
}

export interface InstanceListFilter {
  orderNo?: string;
  productNo?: string;
  statuses?: number[];
  limit?: number;
  offset?: number;
}

/** The Orders facade (src/orders/index.ts). */
export interface OrdersPort {
  open(input: OpenInput): Promise<OrderAnswer>;
  renew(input: RenewInput): Promise<OrderAnswer>;
  release(input: ReleaseInput): Promise<OrderAnswer>;
  afterSale(input: AfterSaleInput): Promise<OrderAnswer>;
  assignIp(input: AssignIpInput): Promise<OrderAnswer>;
  checkAssignIp(ip: string): Promise<{ ip: string; canBuyStatus: boolean }>;
  change(instanceNo: string, input?: Omit<ChangeInput, 'instanceNo'>): Promise<OrderAnswer>;
  resetPassword(input: ResetInput): Promise<unknown>;
  listOrders(filter?: OrderListFilter): Promise<OrderAnswer[]>;
  /** By platform or merchant number, refreshed from the platform; undefined when unknown. */
  getOrder(no: string): Promise<OrderAnswer | undefined>;
  listInstances(filter?: InstanceListFilter): Promise<InstanceAnswer[]>;
  /** `refresh` reads it from the platform first. */
  getInstance(instanceNo: string, options?: { refresh?: boolean }): Promise<InstanceAnswer | undefined>;
}

/** Platform callbacks (src/orders/callbacks.ts handleCallback). */
export type CallbackHandler = (query: Record<string, unknown>) => Promise<{ status: number; body: unknown }>;

/** src/accounts/balances.ts BalanceWatcher: one ProxyInfo read (the proxy type follows from the product). */
export interface BalancesPort {
  fetch(account: string, productNo: string): Promise<object>;
}

export type { FlowLogQuery };

/** src/accounts/traffic.ts Traffic: flow-use log (bytes) and traffic return (MB). */
export interface TrafficPort {
  flowLog(query: FlowLogQuery): Promise<object>;
  returnTraffic(input: TrafficReturn): Promise<object>;
}

/** src/accounts/whitelist.ts Whitelist: each answers the platform's list as it now stands. */
export interface WhitelistPort {
  list(account: string, productNo: string): Promise<string[]>;
  add(account: string, productNo: string, ip: string): Promise<string[]>;
  remove(account: string, productNo: string, ip: string): Promise<string[]>;
}

export interface UserRow {
  name: string;
  usedBytes: number;
  limitBytes: number;
  activeConnections: number;
}

/** src/users/admin-port.ts over the users directory (src/users/directory.ts). */
export interface UsersPort {
  /** One page (src/users/listing.ts); `next` = the cursor to pass as `after`, null on the last page; `total` = every match. */
  list(query?: UserListQuery): Promise<{ items: UserRow[]; next: string | null; total: number }>;
  get(name: string): UserView | undefined;
  create(input: CreateUserInput): Promise<UserView>;
  /** POST /v1/users/batch (src/users/bulk.ts): per-row errors, generated passwords once. */
  createBatch(rows: readonly unknown[]): Promise<BatchResult>;
  patch(name: string, patch: UserPatch): Promise<UserView>;
  remove(name: string): Promise<void>;
  /** Sets `password`, or generates one (returned once in the answer). */
  setPassword(name: string, password?: string): Promise<UserView>;
  /** UNKNOWN_USER (404) for a user not known; a bad limit is 400. */
  setLimit(user: string, limitBytes: number): Promise<UserRow>;
}

/** src/pool/registry.ts PoolRegistry. */
export interface PoolsPort {
  snapshot(): object[];
}

/** src/session/table.ts SessionTable. */
export interface SessionsPort {
  list(): { user: string; sessionId: string; nodeId: string; startedAt: number; expiresAt: number }[];
  rotate(user: string, sessionId: string, reason: 'manual'): boolean;
}

/** The prom-client registry of createMetrics() (getSingleMetric feeds the dashboard's series). */
export interface MetricsPort extends MetricSource {
  contentType: string;
  metrics(): Promise<string>;
}

/** src/telemetry/sampler.ts StatsSampler: the dashboard's last hour, read from the metrics. */
export interface StatsPort {
  view(since?: number): StatsView;
}

export interface Readiness {
  platform: boolean;
  store: boolean;
  listeners: boolean;
}

/** src/events/outbox.ts Events: the outbox as GET /v1/events reads it. */
export interface EventsPort {
  list(filter: { since: number; limit: number }): Promise<EventRecord[]>;
}

/** src/connlog/service.ts ConnectionLogService: the connection log and the usage rollups. */
export interface ConnectionsPort {
  list(q: ConnectionListQuery): Promise<{ items: ConnectionRecord[]; next: string | null }>;
  active(): LiveConnection[];
  /** false when no such connection is live */
  closeConnection(id: string): boolean;
  usage(q: UsageListQuery): Promise<UsageRow[]>;
  comparePlatform(q: UsageListQuery): Promise<PlatformCompareRow[]>;
}

export interface AdminDeps {
  platform: PlatformPort;
  catalog: CatalogPort;
  orders: OrdersPort;
  balances: BalancesPort;
  traffic: TrafficPort;
  whitelist: WhitelistPort;
  users: UsersPort;
  pools: PoolsPort;
  sessions: SessionsPort;
  metrics: MetricsPort;
  /** Real checks, see readiness.ts createReadiness(). */
  ready(): Promise<Readiness>;
  /** The dashboard's series; buildAdminServer runs its own sampler over `metrics` when absent. */
  stats?: StatsPort;
  /** The event outbox (GET /v1/events); without it the route answers 503 EVENTS_UNAVAILABLE. */
  events?: EventsPort;
  connections: ConnectionsPort;
  /** config billing: the currency usage amounts are in */
  billing: { currency: string };
  /** Exits banned by request rules (src/proxy/request-bans.ts BanTable); absent = none listed. */
  bans?: BansPort;
}

/** src/proxy/request-bans.ts BanTable. */
export interface BansPort {
  list(): Ban[];
  lift(id: string): boolean;
}
