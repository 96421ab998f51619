// Shared by the order tests: an Orders over a real store (a SQLite file, or Redis with ROTOR_TEST_STORE=redis:
// test/support/store.ts) and the real client, with a tiny loopback
// HTTP listener that hands the sandbox's callbacks to Orders.handleCallback.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { PlatformClient } from '../../src/platform/client.ts';
import type { OrderRecord, Store } from '../../src/store/index.ts';
import { openTestStore } from '../support/store.ts';
import { Orders, type TrackerSettings } from '../../src/orders/index.ts';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.ts';
import { createLogger, type Logger } from '../../src/telemetry/logger.ts';
import type { Simulator } from '../../src/sim/index.ts';

export interface Harness {
  store: Store;
  client: PlatformClient;
  orders: Orders;
  metrics: Metrics;
  logger: Logger;
  /** every log line written */
  logs: string[];
  callbackUrl: string;
  answers: { status: number; code: string }[];
  close(): Promise<void>;
}

export async function harness(
  sim: Simulator,
  dbPath: string,
  options: {
    retries?: number;
    tracking?: TrackerSettings;
    listen?: boolean;
    sqlite?: boolean;
    storeFinalOrder?: (order: OrderRecord) => Promise<void>;
  } = {},
): Promise<Harness> {
  const store = await openTestStore(dbPath, options.sqlite ? { driver: 'sqlite' } : {});
  const client = new PlatformClient({
    baseUrl: sim.baseUrl,
    appKey: sim.appKey,
    appSecret: sim.appSecret,
    retries: options.retries ?? 2,
    backoff: { baseMs: 10, maxMs: 20 },
    timeoutMs: 3000,
  });
  const metrics = createMetrics({ defaultMetrics: false });
  const logs: string[] = [];
  const logger = createLogger({
    level: 'debug',
    destination: new Writable({
      write(chunk: Buffer, _enc, cb) {
        logs.push(chunk.toString());
        cb();
      },
    }),
  });
  const orders = new Orders({
    client,
    store,
    metrics,
    logger,
    tracking: { pollInitialMs: 40, pollMaxMs: 200, sweepMs: 150, expiryCheckMs: 3_600_000, ...options.tracking },
    ...(options.storeFinalOrder ? { storeFinalOrder: options.storeFinalOrder } : {}),
  });
  const answers: Harness['answers'] = [];
  let server: Server | undefined;
  let callbackUrl = '';
  if (options.listen !== false) {
    server = createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      void orders.handleCallback(u.searchParams).then((a) => {
        answers.push({ status: a.status, code: a.body.code });
        res.writeHead(a.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(a.body));
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    callbackUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`;
    sim.setCallbackUrl(callbackUrl);
  }
  return {
    store,
    client,
    orders,
    metrics,
    logger,
    logs,
    callbackUrl,
    answers,
    async close() {
      await orders.stop();
      if (server) {
        server.closeAllConnections();
        await new Promise<void>((r) => server!.close(() => r()));
      }
      client.close();
      await store.close();
    },
  };
}

import { waitFor } from '../support/wait.ts';

export { waitFor };

/**
 * Waits until the stored order (platform or merchant number) is final. The timeout is a safety net only: 5 s ran
 * out once in a loaded suite (load 10-14) for an order of 120 instances on Redis.
 */
export function finalOrder(h: Harness, no: string, timeoutMs = 30_000) {
  return waitFor(
    async () => {
      const o = await h.store.getOrder(no);
      return o && o.status >= 3 ? o : undefined;
    },
    timeoutMs,
    `order ${no} to finish`,
  );
}
