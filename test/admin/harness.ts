// The admin API over real components: the sandbox platform, the real client, a store (in-memory SQLite, or
// Redis with ROTOR_TEST_STORE=redis: test/support/store.ts),
// Orders (catalog, placer, tracker, callbacks), BalanceWatcher, Traffic, Whitelist, Accounting, a
// PoolRegistry with real password drawers, a SessionTable and the metrics registry. The callback server
// listens on loopback and the sandbox sends its callbacks there.
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { buildAdminServer, buildCallbackServer, createReadiness, type AdminDeps } from '../../src/admin/index.ts';
import { Accounting } from '../../src/accounting/accounting.ts';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { BalanceWatcher } from '../../src/accounts/balances.ts';
import { Traffic } from '../../src/accounts/traffic.ts';
import { Whitelist } from '../../src/accounts/whitelist.ts';
import { Orders } from '../../src/orders/index.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { PwdDrawer, drawApiFromClient } from '../../src/pool/drawer.ts';
import { PoolRegistry } from '../../src/pool/registry.ts';
import { SessionTable } from '../../src/session/table.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import type { Store } from '../../src/store/index.ts';
import { openTestStore } from '../support/store.ts';
import { ConnectionLog, ConnectionLogService, connectionLogStoreFor } from '../../src/connlog/index.ts';
import { platformFlowFrom } from '../../src/connlog/platform-flow.ts';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.ts';
import { Users } from '../../src/users/directory.ts';
import { usersPort } from '../../src/daemon/users-port.ts';
import { SubAccounts } from '../../src/users/sub-account.ts';

export const TOKEN = 'admin-test-token-5f2c';
export const AUTH = { authorization: `Bearer ${TOKEN}` };
export const FLOW = SIM_PRODUCTS.dynamicTraffic;
export const US = SIM_PRODUCTS.staticUsSocks;

export interface Harness {
  sim: Simulator;
  client: PlatformClient;
  store: Store;
  orders: Orders;
  accounting: Accounting;
  /** The users directory (config users alice and bob seeded, as the daemon does). */
  users: Users;
  pools: PoolRegistry;
  sessions: SessionTable;
  metrics: Metrics;
  deps: AdminDeps;
  app: FastifyInstance;
  callbacks: FastifyInstance;
  /** flips what readiness reports for the proxy listeners */
  listeners: { up: boolean };
  close(): Promise<void>;
}

export async function startHarness(): Promise<Harness> {
  const sim = await startSimulator({ orderDelayMs: 60, callbackBackoffMs: 20, gatewayPorts: 1 });
  const metrics = createMetrics({ defaultMetrics: false });
  const client = new PlatformClient({
    baseUrl: sim.baseUrl,
    appKey: sim.appKey,
    appSecret: sim.appSecret,
    retries: 1,
    backoff: { baseMs: 5, maxMs: 10 },
    timeoutMs: 3000,
    metrics,
  });
  const store = await openTestStore();
  const orders = new Orders({
    client,
    store,
    metrics,
    tracking: { pollInitialMs: 40, pollMaxMs: 200, sweepMs: 150, expiryCheckMs: 3_600_000 },
  });
  await orders.start();
  const products = new ProductCatalog({ client });
  const accounting = new Accounting({ store, metrics, flushIntervalMs: 60_000 });
  await accounting.start([
    { name: 'alice', limitBytes: -1 },
    { name: 'bob', limitBytes: 5_000_000 },
  ]);
  const users = new Users({ store, accounting, platform: new SubAccounts(client, products) });
  await users.start([
    { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', limitBytes: -1 },
    { name: 'bob', password: 'bob-pass', mainAccount: 'shop1', limitBytes: 5_000_000 },
  ]);
  const api = drawApiFromClient(client);
  const pools = new PoolRegistry({
    drawerFor: (key) => new PwdDrawer({ api, subAccount: key.user, productNo: key.productNo, region: key.region, sessTime: 5, metrics }),
    metrics,
  });
  const sessions = new SessionTable({ metrics });
  const listeners = { up: true };
  const traffic = new Traffic({ client, products });
  const connections = new ConnectionLogService({
    recorder: new ConnectionLog({ store: connectionLogStoreFor(store), metrics }),
    store: connectionLogStoreFor(store),
    targets: true,
    retention: { retentionDays: 7, maxRecords: 1000, usageRetentionDays: 400 },
    priceOf: () => null,
    accountOf: () => undefined,
    platformFlow: platformFlowFrom(traffic),
  });
  const deps: AdminDeps = {
    platform: client,
    catalog: orders.catalog,
    orders,
    balances: new BalanceWatcher({ client, products, metrics }),
    traffic,
    whitelist: new Whitelist({ client, products, store, egressIp: '127.0.0.1' }),
    users: usersPort(users),
    pools,
    sessions,
    metrics: metrics.registry,
    ready: createReadiness({
      probePlatform: () => client.call('GetAppInfo', {}),
      probeStore: () => store.kvGet('readyz.probe'),
      listenersUp: () => listeners.up,
      platformCacheMs: 0,
    }),
    connections,
    billing: { currency: 'USD' },
  };
  const app = buildAdminServer(deps, { host: '127.0.0.1', token: TOKEN });
  const callbacks = buildCallbackServer((q) => orders.handleCallback(q), { path: '/callback' });
  await callbacks.listen({ host: '127.0.0.1', port: 0 });
  sim.setCallbackUrl(`http://127.0.0.1:${(callbacks.server.address() as AddressInfo).port}/callback`);
  return {
    sim,
    client,
    store,
    orders,
    accounting,
    users,
    pools,
    sessions,
    metrics,
    deps,
    app,
    callbacks,
    listeners,
    async close() {
      await app.close();
      await connections.close();
      await callbacks.close();
      await orders.stop();
      pools.close();
      await users.close();
      await accounting.close();
      client.close();
      await sim.close();
      await store.close();
    },
  };
}

export { waitFor } from '../support/wait.ts';
