// Rotor's gateway for the benchmark, in its own process so its event loop is not the driver's: the real
// Router, Socks5Listener and HttpListener, a session table and metrics, with one fixed upstream per user
// (StaticPool): user `bs` leaves through the SOCKS5 upstream, user `bh` through the HTTP one. Meters are the
// in-memory UnlimitedMeters, or with `"meters":"accounting"` the real Accounting over a SQLite store.
//
//   node --import tsx bench/gateway.ts '{"socks5":{"port":N,"username":"u","password":"p"},"http":{...}}'
//
// Prints one JSON line {"http","socks5","pid"} once both listeners are up. SIGTERM closes and exits 0 (so a
// --cpu-prof run writes its profile).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Accounting } from '../src/accounting/index.ts';
import { StaticPool } from '../src/pool/static.ts';
import type { NodeSource, PoolKey, UpstreamNode } from '../src/pool/types.ts';
import { HttpListener } from '../src/proxy/http.ts';
import { UnlimitedMeters } from '../test/support/meters.ts';
import { Router } from '../src/proxy/router.ts';
import { Socks5Listener } from '../src/proxy/socks5.ts';
import type { LocalUser, MeterProvider, PoolProvider, UserDirectory } from '../src/proxy/types.ts';
import { SessionTable } from '../src/session/table.ts';
import { openStore } from '../src/store/index.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { createMetrics } from '../src/telemetry/metrics.ts';
import { ConnectionLog } from '../src/connlog/recorder.ts';
import { SqliteConnectionLog } from '../src/store/sqlite-connection-log.ts';
import { SqliteStore } from '../src/store/sqlite.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER, type GatewaySpec, type UpstreamSpec } from './spec.ts';

function upstream(protocol: 'socks5' | 'http', s: UpstreamSpec): UpstreamNode {
  return {
    id: `${protocol}://${s.username}@127.0.0.1:${s.port}`,
    protocol,
    host: '127.0.0.1',
    port: s.port,
    username: s.username,
    password: s.password,
    source: 'instance',
  };
}

function localUser(name: string): LocalUser {
  return { name, password: BENCH_PASSWORD, mainAccount: 'bench', product: 'bench', draw: 'pwd', sessTime: 5, limitBytes: -1 };
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as GatewaySpec;
  const metrics = createMetrics({ defaultMetrics: false });
  const logger = createLogger({ level: 'warn', destination: pino.destination(2) });
  const users = new Map([SOCKS_USER, HTTP_USER].map((n) => [n, localUser(n)]));
  const directory: UserDirectory = { get: (name) => users.get(name) };
  const socksPool = new StaticPool('bench/socks5', upstream('socks5', spec.socks5));
  const httpPool = new StaticPool('bench/http', upstream('http', spec.http));
  const pools: PoolProvider = { pool: (key: PoolKey): NodeSource => (key.user === SOCKS_USER ? socksPool : httpPool) };

  let meters: MeterProvider;
  let cleanup = async (): Promise<void> => {};
  if (spec.meters === 'accounting') {
    const dir = mkdtempSync(join(tmpdir(), 'rotor-bench-'));
    const store = openStore(join(dir, 'rotor.db'));
    const accounting = new Accounting({ store, metrics, logger });
    await accounting.start([...users.values()].map((u) => ({ name: u.name, limitBytes: u.limitBytes })));
    meters = accounting;
    cleanup = async () => {
      await accounting.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    };
  } else {
    meters = new UnlimitedMeters();
  }

  // Records on: the daemon's path (a recorder writing batches to SQLite tables); off: ids only.
  let recorder: ConnectionLog | undefined;
  if (spec.records === 'store') {
    const dir = mkdtempSync(join(tmpdir(), 'rotor-bench-records-'));
    const store = new SqliteStore(join(dir, 'rotor.db'));
    recorder = new ConnectionLog({ store: new SqliteConnectionLog(store.database()), metrics, logger });
    const previous = cleanup;
    cleanup = async () => {
      await recorder!.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
      await previous();
    };
  }
  const withRecorder = recorder ? { recorder } : {};
  const router = new Router({ users: directory, meters, pools, sessions: new SessionTable({ metrics }), metrics, logger });
  const http = new HttpListener({ router, port: 0, metrics, logger, ...withRecorder });
  const socks5 = new Socks5Listener({ router, port: 0, metrics, logger, ...withRecorder });
  const [h, s] = await Promise.all([http.listen(), socks5.listen()]);
  process.stdout.write(`${JSON.stringify({ http: h.port, socks5: s.port, pid: process.pid })}\n`);

  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void Promise.all([http.close(), socks5.close()])
      .then(cleanup)
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('disconnect', stop);
}

await main();
