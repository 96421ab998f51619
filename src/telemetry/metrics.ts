// One prom-client registry per Rotor process (per daemon instance in tests), holding the metric names of
// docs/reference.md as constants. Components receive the Metrics object; none creates metrics of its own.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { boundPoolSeries, type PoolSeriesBound } from './pool-series.ts';
import { boundBalanceSeries, type BalanceSeriesBound } from './balance-series.ts';

export const METRIC = {
  connectionsActive: 'rotor_proxy_connections_active',
  connectionsTotal: 'rotor_proxy_connections_total',
  bytesTotal: 'rotor_proxy_bytes_total',
  upstreamConnectSeconds: 'rotor_upstream_connect_seconds',
  upstreamFailures: 'rotor_upstream_failures_total',
  poolProxies: 'rotor_pool_proxies',
  poolNodes: 'rotor_pool_nodes',
  sessionsActive: 'rotor_sessions_active',
  sessionRotations: 'rotor_session_rotations_total',
  draws: 'rotor_draws_total',
  platformRequests: 'rotor_platform_requests_total',
  platformRequestSeconds: 'rotor_platform_request_seconds',
  flowBalance: 'rotor_flow_balance_bytes',
  flowBalancePairs: 'rotor_flow_balance_pairs',
  userUsedBytes: 'rotor_user_used_bytes',
  userLimitBytes: 'rotor_user_limit_bytes',
  orders: 'rotor_orders',
  callbacks: 'rotor_callbacks_total',
  instances: 'rotor_instances',
  upstreamHedges: 'rotor_upstream_hedges_total',
  upstreamStallsForgiven: 'rotor_upstream_stalls_forgiven_total',
  upstreamProbes: 'rotor_upstream_probes_total',
  events: 'rotor_events_total',
  webhookDeliveries: 'rotor_webhook_deliveries_total',
  connlogDropped: 'rotor_connlog_dropped_total',
  connlogWritten: 'rotor_connlog_records_total',
  // ── accounts: lost sub accounts re-created (src/accounts/heal.ts) ──
  subAccountHeals: 'rotor_sub_account_heals_total',
  // Users at scale (src/users/platform-check.ts)
  usersPlatformCheck: 'rotor_users_platform_check',
  // warm upstream connections (src/proxy/warm.ts)
  upstreamWarmConnections: 'rotor_upstream_warm_connections',
  upstreamWarmTotal: 'rotor_upstream_warm_total',
  // abuse bounds (proxy login back-off)
  authFailures: 'rotor_auth_failures_total',
  // SOCKS5 UDP ASSOCIATE (src/proxy/udp-associate.ts)
  udpDropped: 'rotor_udp_datagrams_dropped_total',
  // file descriptors (src/proxy/accept-guard.ts)
  descriptorExhaustion: 'rotor_descriptor_exhaustion_total',
  descriptorsOpen: 'rotor_descriptors_open',
  descriptorsLimit: 'rotor_descriptors_limit',
  descriptorsExhausted: 'rotor_descriptors_exhausted',
} as const;

/**
 * prom-client's default gauges whose names end in `_total` (promtool: "non-counter metrics should not have
 * _total suffix"). Their per-type siblings (rotor_nodejs_active_handles{type}, …) carry the same counts.
 */
const MISNAMED_DEFAULT_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/**
 * How often the event-loop delay gauges (rotor_nodejs_eventloop_lag_*) sample the loop, ms. prom-client's 10 ms
 * woke an idle daemon 100 times a second, about half of its idle CPU (bench:idle-rss); at 100 ms a stall still
 * shows in the gauges when it spans a sample, and rotor_nodejs_eventloop_lag_seconds is measured at each scrape.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** Results a connection ends with (label `result` of rotor_proxy_connections_total). */
export type ConnectionResult = 'ok' | 'auth_failed' | 'limited' | 'upstream_error' | 'bad_request' | 'not_allowed';

export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry, prefix: 'rotor_', eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    for (const name of MISNAMED_DEFAULT_GAUGES) registry.removeSingleMetric(`rotor_${name}`);
  }
  const registers = [registry];
  return {
    registry,
    ...proxyMetrics(registers),
    ...upstreamMetrics(registers),
    ...platformMetrics(registers),
    ...userMetrics(registers),
    ...recordMetrics(registers),
    ...udpMetrics(registers),
    ...descriptorMetrics(registers),
  };
}

/** The process's file descriptors: how many are open, the limit, and what failed for want of one. */
function descriptorMetrics(registers: Registry[]) {
  return {
    // where: accept (a client refused or dropped at accept) | dial (an upstream dial that could not open its socket)
    descriptorExhaustion: new Counter({
      name: METRIC.descriptorExhaustion,
      help: 'Operations that failed for want of a file descriptor (EMFILE/ENFILE): clients refused at accept, upstream dials',
      labelNames: ['where'] as const,
      registers,
    }),
    descriptorsOpen: new Gauge({ name: METRIC.descriptorsOpen, help: 'File descriptors open in the process (sampled)', registers }),
    descriptorsLimit: new Gauge({ name: METRIC.descriptorsLimit, help: "The process's soft descriptor limit (RLIMIT_NOFILE)", registers }),
    descriptorsExhausted: new Gauge({
      name: METRIC.descriptorsExhausted,
      help: '1 while descriptors are exhausted and the proxy listeners refuse new clients, else 0',
      registers,
    }),
  };
}

/** SOCKS5 UDP ASSOCIATE: datagrams Rotor read and did not pass on. */
function udpMetrics(registers: Registry[]) {
  return {
    // reasons: malformed | fragment | not_allowed | foreign | queue_full
    udpDropped: new Counter({
      name: METRIC.udpDropped,
      help: 'UDP datagrams dropped by reason (bad header or target, fragment, refused by rules, not from the client, over the rate and queue)',
      labelNames: ['reason'] as const,
      registers,
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** Client connections, bytes relayed and logins on the proxy ports. */
function proxyMetrics(registers: Registry[]) {
  return {
    connectionsActive: new Gauge({
      name: METRIC.connectionsActive,
      help: 'Client connections open now',
      labelNames: ['listener'] as const,
      registers,
    }),
    connectionsTotal: new Counter({
      name: METRIC.connectionsTotal,
      help: 'Client connections by outcome',
      labelNames: ['listener', 'result'] as const,
      registers,
    }),
    bytesTotal: new Counter({
      name: METRIC.bytesTotal,
      help: 'Bytes relayed per user',
      labelNames: ['user', 'direction'] as const,
      registers,
    }),
    /**
     * True once rotor_proxy_bytes_total is written from the users' meters at every scrape (src/users/series.ts,
     * the daemon): the relays' own counts would then be thrown away at the next scrape, after costing two
     * labelled children per connection and a series per user in between; they count only without it (tests, tools).
     */
    bytesFromMeters: { on: false },
    // abuse bounds (proxy login back-off): reasons credentials | blocked_source | blocked_user | busy
    authFailures: new Counter({
      name: METRIC.authFailures,
      help: 'Failed proxy logins by reason (wrong name or password, address or name blocked, too many waiting)',
      labelNames: ['reason'] as const,
      registers,
    }),
  };
}

/** Dials, nodes, sessions and warm connections on the upstream side. */
function upstreamMetrics(registers: Registry[]) {
  // Per-pool series are bounded like the per-user ones (src/telemetry/pool-series.ts).
  const poolSeries: PoolSeriesBound = { max: 50 };
  const poolProxies = new Gauge({
    name: METRIC.poolProxies,
    help: 'Upstream nodes per pool and state (at most metrics.userSeriesMax / 2 pools)',
    labelNames: ['pool', 'state'] as const,
    registers,
  });
  const poolNodes = new Gauge({
    name: METRIC.poolNodes,
    help: 'Upstream nodes of every pool, by state',
    labelNames: ['state'] as const,
    registers,
  });
  boundPoolSeries(poolProxies, poolNodes, poolSeries);
  return {
    poolSeries,
    poolProxies,
    poolNodes,
    upstreamConnectSeconds: new Histogram({
      name: METRIC.upstreamConnectSeconds,
      help: 'Time to an established upstream tunnel',
      labelNames: ['kind'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    upstreamFailures: new Counter({
      name: METRIC.upstreamFailures,
      help: 'Upstream dial failures by reason',
      labelNames: ['reason'] as const,
      registers,
    }),
    sessionsActive: new Gauge({ name: METRIC.sessionsActive, help: 'Sticky sessions held', registers }),
    sessionRotations: new Counter({
      name: METRIC.sessionRotations,
      help: 'Sticky sessions moved to a new node',
      labelNames: ['reason'] as const,
      registers,
    }),
    upstreamHedges: new Counter({
      name: METRIC.upstreamHedges,
      help: 'Parallel dials started because a node was slow to answer, by outcome',
      labelNames: ['outcome'] as const,
      registers,
    }),
    upstreamStallsForgiven: new Counter({
      name: METRIC.upstreamStallsForgiven,
      help: 'Nodes marked stalled when a hedge won that answered within the grace after all (a hedge delay too short for them)',
      registers,
    }),
    upstreamProbes: new Counter({
      name: METRIC.upstreamProbes,
      help: 'Background health probes of upstream nodes, by result',
      labelNames: ['result'] as const,
      registers,
    }),
    // warm upstream connections (src/proxy/warm.ts)
    upstreamWarmConnections: new Gauge({
      name: METRIC.upstreamWarmConnections,
      help: 'Upstream connections opened ahead and ready for a new tunnel',
      registers,
    }),
    upstreamWarmTotal: new Counter({
      name: METRIC.upstreamWarmTotal,
      help: 'Warm upstream connections by outcome (used by a tunnel, expired idle or closed by the upstream, failed to open or to serve)',
      labelNames: ['outcome'] as const,
      registers,
    }),
  };
}

/** The merchant's platform: calls, draws, balances, orders, instances and accounts. */
function platformMetrics(registers: Registry[]) {
  // Balance series are bounded like the per-user ones (src/telemetry/balance-series.ts).
  const balanceSeries: BalanceSeriesBound = { max: 50 };
  const flowBalance = new Gauge({
    name: METRIC.flowBalance,
    help: "Dynamic traffic balance in bytes (the platform's MB at the product's MB size); at most metrics.userSeriesMax / 2 pairs, lowest first",
    labelNames: ['account', 'product'] as const,
    registers,
  });
  const flowBalancePairs = new Gauge({
    name: METRIC.flowBalancePairs,
    help: '(main account, product) balances watched, by state (empty: 0 bytes or less; funded)',
    labelNames: ['state'] as const,
    registers,
  });
  boundBalanceSeries(flowBalance, flowBalancePairs, balanceSeries);
  return {
    balanceSeries,
    flowBalance,
    flowBalancePairs,
    draws: new Counter({ name: METRIC.draws, help: 'Draws from the platform', labelNames: ['method', 'result'] as const, registers }),
    platformRequests: new Counter({
      name: METRIC.platformRequests,
      help: 'Platform calls by operation and result code',
      labelNames: ['operation', 'code'] as const,
      registers,
    }),
    platformRequestSeconds: new Histogram({
      name: METRIC.platformRequestSeconds,
      help: 'Platform call duration, retries included',
      labelNames: ['operation'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    orders: new Gauge({
      name: METRIC.orders,
      help: 'Local order records by type and status',
      labelNames: ['type', 'status'] as const,
      registers,
    }),
    callbacks: new Counter({
      name: METRIC.callbacks,
      help: 'Platform callbacks received',
      labelNames: ['type', 'result'] as const,
      registers,
    }),
    instances: new Gauge({ name: METRIC.instances, help: 'Static instances by status', labelNames: ['status'] as const, registers }),
    subAccountHeals: new Counter({
      name: METRIC.subAccountHeals,
      help: 'Sub accounts the platform had lost (10062/10092), re-created by outcome',
      labelNames: ['outcome'] as const,
      registers,
    }),
  };
}

/** Local users: meters, limits and the background platform check. */
function userMetrics(registers: Registry[]) {
  return {
    userUsedBytes: new Gauge({ name: METRIC.userUsedBytes, help: 'Bytes used per local user', labelNames: ['user'] as const, registers }),
    userLimitBytes: new Gauge({
      name: METRIC.userLimitBytes,
      help: 'Byte limit per local user (-1 unlimited)',
      labelNames: ['user'] as const,
      registers,
    }),
    // Users at scale
    usersPlatformCheck: new Gauge({
      name: METRIC.usersPlatformCheck,
      help: "The background check of every user's platform side since start, by state (checked, failed, pending)",
      labelNames: ['state'] as const,
      registers,
    }),
  };
}

/** What Rotor writes down: events, webhooks and connection records. */
function recordMetrics(registers: Registry[]) {
  return {
    events: new Counter({ name: METRIC.events, help: 'Events written to the outbox, by type', labelNames: ['type'] as const, registers }),
    webhookDeliveries: new Counter({
      name: METRIC.webhookDeliveries,
      help: 'Webhook POSTs by outcome (delivered: a 2xx; failed: retried later)',
      labelNames: ['result'] as const,
      registers,
    }),
    connlogDropped: new Counter({
      name: METRIC.connlogDropped,
      help: 'Connection records dropped: the write queue was full (oldest first), or a stop could not write them',
      registers,
    }),
    connlogWritten: new Counter({
      name: METRIC.connlogWritten,
      help: 'Connection records written, by sink',
      labelNames: ['sink'] as const,
      registers,
    }),
  };
}
