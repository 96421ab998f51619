// Shared by the reliability tests and the soak: a daemon on the embedded sandbox with small timeouts,
// a loopback echo target, and counters the tests compare against a baseline (open fds, active gauges).
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig, type ConfigInput } from '../../src/config/index.ts';
import { startDaemon, type Daemon, type DaemonOptions } from '../../src/main.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { testStoreConfig } from '../support/store.ts';

export interface TestDaemon {
  daemon: Daemon;
  close(): Promise<void>;
}

export const USERS = [
  { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', sessTime: 5 },
  { name: 'carol', password: 'carol-pass', mainAccount: 'shop1', sessTime: 5 },
] as const;

/** A daemon with ports 0, a temp store, a silent logger and the given config overrides. */
export async function startTestDaemon(
  overrides: {
    proxy?: Record<string, unknown>;
    pool?: Record<string, unknown>;
    platform?: Record<string, unknown>;
    orders?: Record<string, unknown>;
    accounts?: Record<string, unknown>;
    admin?: Record<string, unknown>;
  } = {},
  options: DaemonOptions = {},
): Promise<TestDaemon> {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-rel-'));
  const raw: ConfigInput = {
    platform: { mode: 'embedded', timeoutMs: 2_000, retries: 3, backoff: { baseMs: 5, maxMs: 50 }, ...overrides.platform },
    proxy: {
      http: { host: '127.0.0.1', port: 0 },
      socks5: { host: '127.0.0.1', port: 0 },
      handshakeTimeoutMs: 500,
      connectTimeoutMs: 1_000,
      ...overrides.proxy,
    },
    admin: { host: '127.0.0.1', port: 0, ...overrides.admin },
    callback: { host: '127.0.0.1', port: 0, path: '/callback' },
    // A file in `dir`, or a fleet of one on the test Redis under ROTOR_TEST_STORE=redis (test/support/store.ts).
    ...(await testStoreConfig(join(dir, 'rotor.db'))),
    log: { level: 'silent' },
    users: USERS.map((u) => ({ ...u, product: '', draw: 'pwd' as const, limitBytes: -1 })),
    pool: { ...overrides.pool },
    orders: { pollInitialMs: 100, pollMaxMs: 500, sweepMs: 500, ...overrides.orders },
    accounts: { ...overrides.accounts },
  };
  const config = parseConfig(raw, { env: {} });
  const daemon = await startDaemon(config, { logger: createLogger({ level: 'silent' }), ...options });
  return {
    daemon,
    async close() {
      await daemon.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A loopback echo server: every byte comes back. */
export async function startEcho(): Promise<{ port: number; server: Server; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    server,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Open descriptors of this process (Linux). */
export function openFds(): number {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return -1;
  }
}

export async function activeConnections(daemon: Daemon): Promise<Record<string, number>> {
  const m = await daemon.metrics.registry.getSingleMetric('rotor_proxy_connections_active')?.get();
  const out: Record<string, number> = {};
  for (const v of m?.values ?? []) out[String(v.labels.listener)] = v.value;
  return out;
}

/** Waits until `check` holds or `ms` passes (test/support/wait.ts). */
export { eventually } from '../support/wait.ts';

/** A seeded generator, so a failing fuzz case can be replayed from its seed. */
export { seededRandom as seeded } from '../../src/sim/platform/random.ts';
