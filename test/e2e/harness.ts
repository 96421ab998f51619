// Shared helpers for the end-to-end tests: the real daemon (startDaemon, or `rotor start` as a child process)
// on the embedded sandbox, a loopback target that says which address reached it, curl and Node clients for
// both listeners, the admin API and the metrics page. Everything listens on 127.0.0.1 port 0.
//
// Typical use:
//   const gw = await startGateway({ config: { proxy: { connectTimeoutMs: 1500 } } });
//   const target = await startTarget();
//   const r = await curl([...viaSocks5h(gw.ports.socks5, 'alice', 'alice-pass'), target.url()]);
//   assert.ok(gw.exits.includes(r.body));  // the target saw one of the sandbox's exits, not 127.0.0.1
//   await target.close(); await gw.close();
//
// The sandbox's upstream exits bind 127.0.0.2 .. 127.0.0.9 as their source address (`gw.exits`); Linux
// loopback delivers those to a target listening on 127.0.0.1, so the target's `remoteAddress` names the exit.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SocksClient } from 'socks';
import { parse as parseYaml } from 'yaml';
import { parseConfig, type Config } from '../../src/config/index.ts';
import { startDaemon, type Daemon, type DaemonOptions } from '../../src/main.ts';
import { isRedisUrl } from '../../src/store/index.ts';
import { testStoreConfig } from '../support/store.ts';
import { poll } from '../support/wait.ts';
import { runCurl } from '../support/curl.ts';
import { sumSamples } from '../support/prometheus.ts';
import { launchRotor } from '../support/rotor-process.ts';
import { startHttpTarget, type HttpTarget } from '../support/target.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const DEFAULT_CONFIG_FILE = join(REPO_ROOT, 'config/default.yaml');

// ───────────────────────────── clocks ─────────────────────────────

/** Real time plus an offset the test moves forward: timers still run in real time, expiry checks jump. */
export interface ManualClock {
  now(): number;
  advance(ms: number): void;
  readonly offsetMs: number;
}

export function manualClock(): ManualClock {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance(ms: number) {
      offset += ms;
    },
    get offsetMs() {
      return offset;
    },
  };
}

// ───────────────────────────── config ─────────────────────────────

/** A partial config: mappings merge key by key, arrays (users) and scalars replace. */
export type ConfigOverrides = { [key: string]: unknown };

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = isMapping(v) && isMapping(out[k]) ? deepMerge(out[k], v) : v;
  }
  return out;
}

/**
 * config/default.yaml (users alice and bob, the embedded sandbox) with every listener on port 0, the store in
 * memory, logs silent, then `overrides` merged on top. The environment is ignored (no ROTOR_* leaks in).
 */
export function testConfig(overrides: ConfigOverrides = {}): Config {
  const raw = parseYaml(readFileSync(DEFAULT_CONFIG_FILE, 'utf8')) as Record<string, unknown>;
  const forTests = deepMerge(raw, {
    // Failed logins answered at once (the default waits 250 ms each); test/e2e/abuse-auth.test.ts sets its own.
    proxy: { http: { host: '127.0.0.1', port: 0 }, socks5: { host: '127.0.0.1', port: 0 }, auth: { failureDelayMs: 0 } },
    admin: { host: '127.0.0.1', port: 0 },
    callback: { host: '127.0.0.1', port: 0 },
    store: { path: ':memory:' },
    log: { level: process.env.ROTOR_E2E_LOG ?? 'silent' },
  });
  return parseConfig(deepMerge(forTests, overrides), { env: {} });
}

/**
 * The store of `overrides` (':memory:' when it names none) on the driver of ROTOR_TEST_STORE: under redis the
 * daemon runs as a fleet of one on the test Redis (test/support/store.ts). A redis:// path is kept as given.
 */
async function withTestStore(overrides: ConfigOverrides): Promise<ConfigOverrides> {
  const store = isMapping(overrides.store) ? overrides.store : {};
  const path = typeof store.path === 'string' ? store.path : ':memory:';
  if (isRedisUrl(path)) return overrides;
  const { store: resolved, fleet } = await testStoreConfig(path);
  // The test's own fleet settings win, except the prefix that keeps its keys apart.
  return deepMerge(deepMerge(fleet ? { fleet } : {}, overrides), {
    store: resolved,
    ...(fleet ? { fleet: { prefix: fleet.prefix } } : {}),
  });
}

// ───────────────────────────── the daemon in-process ─────────────────────────────

export interface GatewayOptions {
  /** Merged over testConfig()'s defaults. */
  config?: ConfigOverrides;
  /** The gateway's clock (sessions, pools, node expiry). Default: a fresh manualClock(). */
  clock?: ManualClock;
  /** Sandbox platform time from order acceptance to its final state. Default 100 ms (static orders are quick). */
  orderDelayMs?: number;
  /** Sandbox clock speed (platform seconds per real second). Default 1. */
  clockSpeed?: number;
  /** Anything else for startDaemon (logger, metrics). */
  daemon?: Omit<DaemonOptions, 'now' | 'sim'>;
}

export interface Gateway {
  daemon: Daemon;
  config: Config;
  clock: ManualClock;
  ports: Daemon['ports'];
  /** The sandbox's upstream exit addresses (127.0.0.2 ..): what a target sees when traffic went through Rotor. */
  exits: readonly string[];
  /** The sandbox's password-gateway ports (where DrawByPwd nodes point); fault them with daemon.sim.upstreams.setFault. */
  gatewayPorts: readonly number[];
  /** http://127.0.0.1:<admin> */
  adminUrl: string;
  /** JSON from the admin API, with the bearer token when the config sets one. */
  admin<T = unknown>(path: string, init?: { method?: string; body?: unknown }): Promise<{ status: number; body: T }>;
  /** The Prometheus text of GET /metrics. */
  metricsText(): Promise<string>;
  /** Sum of the samples of `name` whose labels include `labels` (0 when none). */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  close(drainMs?: number): Promise<void>;
}

export async function startGateway(options: GatewayOptions = {}): Promise<Gateway> {
  const config = testConfig(await withTestStore(options.config ?? {}));
  const clock = options.clock ?? manualClock();
  const daemon = await startDaemon(config, {
    ...options.daemon,
    now: clock.now,
    sim: { orderDelayMs: options.orderDelayMs ?? 100, ...(options.clockSpeed !== undefined ? { clockSpeed: options.clockSpeed } : {}) },
  });
  const upstreams = daemon.sim?.upstreams;
  const adminUrl = `http://127.0.0.1:${daemon.ports.admin}`;
  const token = config.admin.token;
  const gw: Gateway = {
    daemon,
    config,
    clock,
    ports: daemon.ports,
    exits: upstreams?.exitAddresses ?? [],
    gatewayPorts: upstreams?.gatewayPorts ?? [],
    adminUrl,
    async admin<T>(path: string, init: { method?: string; body?: unknown } = {}) {
      const headers: Record<string, string> = {};
      if (token) headers.authorization = `Bearer ${token}`;
      if (init.body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(adminUrl + path, {
        method: init.method ?? (init.body !== undefined ? 'POST' : 'GET'),
        headers,
        ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
        signal: AbortSignal.timeout(20_000),
      });
      const text = await res.text();
      return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
    },
    async metricsText() {
      const res = await fetch(`${adminUrl}/metrics`, { signal: AbortSignal.timeout(20_000) });
      return res.text();
    },
    async metric(name: string, labels: Record<string, string> = {}) {
      return metricValue(await gw.metricsText(), name, labels);
    },
    close: (drainMs?: number) => daemon.close(drainMs),
  };
  return gw;
}

/** Sum of the samples of `name` in Prometheus text whose labels include every pair of `labels`. */
export const metricValue = sumSamples;

// ───────────────────────────── `rotor start` as a child process ─────────────────────────────

export interface RotorProcess {
  child: ChildProcess;
  ports: { http: number; socks5: number; admin: number; callback: number };
  /** Everything the process wrote to stdout and stderr so far (pino JSON lines). */
  output(): string;
  /** SIGTERM (or `signal`) and wait for the exit; resolves with the exit code (null if killed by a signal). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
}

/**
 * `node --import tsx src/cli.ts start [args]` from the repo root, with every listener on port 0 and the store
 * in a temp dir unless `env` says otherwise; resolves once the log says 'rotor is ready' (ports read from it).
 */
export async function startRotorProcess(
  options: { args?: string[]; env?: Record<string, string>; readyTimeoutMs?: number } = {},
): Promise<RotorProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-e2e-'));
  const rotor = await launchRotor({
    ...(options.args ? { args: options.args } : {}),
    ...(options.readyTimeoutMs ? { readyTimeoutMs: options.readyTimeoutMs } : {}),
    env: {
      ROTOR_HTTP_PORT: '0',
      ROTOR_SOCKS_PORT: '0',
      ROTOR_ADMIN_PORT: '0',
      ROTOR_CALLBACK_PORT: '0',
      ROTOR_STORE: join(dir, 'rotor.db'),
      ROTOR_LOG_LEVEL: 'info',
      ...options.env,
    },
  }).catch((err: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  void rotor.exited.then(() => rmSync(dir, { recursive: true, force: true }));
  return {
    child: rotor.child,
    ports: rotor.ports,
    output: rotor.output,
    async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 15_000) {
      return (await rotor.stop(signal, timeoutMs)).code;
    },
  };
}

// ───────────────────────────── the target ─────────────────────────────

export type Target = HttpTarget;

/** An HTTP server on 127.0.0.1 that answers a request with the peer address as text (test/support/target.ts). */
export const startTarget = startHttpTarget;

// ───────────────────────────── curl ─────────────────────────────

export interface CurlResult {
  /** curl's exit code: 0 ok, 56 CONNECT refused by the proxy, 97 SOCKS5 failure, 28 timeout … */
  exitCode: number;
  /** the HTTP status curl saw (0 when none) */
  status: number;
  body: string;
  stderr: string;
  elapsedMs: number;
}

/**
 * Runs curl with `args` (proxy args from via*(), then the URL, then any flags) and `-sS --max-time`, and
 * reports exit code, HTTP status, body and elapsed time. Never rejects on curl's own failures.
 */
export async function curl(args: string[], options: { maxTimeS?: number } = {}): Promise<CurlResult> {
  const r = await runCurl(args, { maxTimeS: options.maxTimeS ?? 30, report: true });
  return { exitCode: r.exitCode, status: r.status, body: r.stdout, stderr: r.stderr, elapsedMs: r.elapsedMs };
}

const cred = (user: string, pass: string) => `${encodeURIComponent(user)}:${encodeURIComponent(pass)}`;

/** curl args: plain HTTP through the HTTP listener (absolute-URI requests). */
export function viaHttp(port: number, user: string, pass: string): string[] {
  return ['-x', `http://${cred(user, pass)}@127.0.0.1:${port}`];
}

/** curl args: a CONNECT tunnel through the HTTP listener (`-p`), even for http:// URLs. */
export function viaConnect(port: number, user: string, pass: string): string[] {
  return ['-p', '-x', `http://${cred(user, pass)}@127.0.0.1:${port}`];
}

/** curl args: SOCKS5 with the proxy resolving names (`-x socks5h://`). */
export function viaSocks5h(port: number, user: string, pass: string): string[] {
  return ['-x', `socks5h://${cred(user, pass)}@127.0.0.1:${port}`];
}

/** curl args: SOCKS5 spelled `--socks5-hostname host:port --proxy-user u:p`. */
export function viaSocks5Hostname(port: number, user: string, pass: string): string[] {
  return ['--socks5-hostname', `127.0.0.1:${port}`, '--proxy-user', `${user}:${pass}`];
}

/** Every way curl can reach a target through Rotor, by name, for table-driven tests. */
export function curlVias(ports: { http: number; socks5: number }): Array<{ name: string; args: (user: string, pass: string) => string[] }> {
  return [
    { name: 'curl -x http:// (absolute URI)', args: (u, p) => viaHttp(ports.http, u, p) },
    { name: 'curl -p -x http:// (CONNECT)', args: (u, p) => viaConnect(ports.http, u, p) },
    { name: 'curl -x socks5h://', args: (u, p) => viaSocks5h(ports.socks5, u, p) },
    { name: 'curl --socks5-hostname', args: (u, p) => viaSocks5Hostname(ports.socks5, u, p) },
  ];
}

// ───────────────────────────── Node clients ─────────────────────────────

export interface HttpResult {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  elapsedMs: number;
}

function basic(user: string, pass: string): string {
  return `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
}

/** Node http: an absolute-URI GET through the HTTP listener, on a new connection (no agent). */
export function nodeHttpGet(
  proxyPort: number,
  user: string | undefined,
  pass: string,
  url: string,
  timeoutMs = 30_000,
): Promise<HttpResult> {
  const started = Date.now();
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port: proxyPort,
      method: 'GET',
      path: url,
      agent: false,
      headers: { host: target.host, ...(user !== undefined ? { 'proxy-authorization': basic(user, pass) } : {}) },
      timeout: timeoutMs,
    });
    req.once('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.once('error', reject);
    req.once('response', (res) => readResult(res, started).then(resolve, reject));
    req.end();
  });
}

/** The whole answer as an HttpResult, `elapsedMs` counted from `started`. */
function readResult(res: IncomingMessage, started: number): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (c: string) => (body += c));
    res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, elapsedMs: Date.now() - started }));
    res.once('error', reject);
  });
}

/** Sends `GET path` over an open tunnel and reads the whole answer (Connection: close). */
function getOverSocket(socket: Socket, hostHeader: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    socket.on('data', (c: Buffer) => parts.push(c));
    socket.once('error', reject);
    socket.once('close', () => {
      const text = Buffer.concat(parts).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: split >= 0 ? text.slice(split + 4) : '' });
    });
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostHeader}\r\nConnection: close\r\n\r\n`);
  });
}

/**
 * Node http: CONNECT through the HTTP listener, then a GET over the tunnel. `status` is the CONNECT answer
 * when it was not 200, else the target's status.
 */
export function nodeConnectGet(
  proxyPort: number,
  user: string,
  pass: string,
  targetPort: number,
  path = '/',
  timeoutMs = 30_000,
): Promise<HttpResult> {
  const started = Date.now();
  const authority = `127.0.0.1:${targetPort}`;
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port: proxyPort,
      method: 'CONNECT',
      path: authority,
      agent: false,
      headers: { host: authority, 'proxy-authorization': basic(user, pass) },
      timeout: timeoutMs,
    });
    req.once('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.once('error', reject);
    // A refused CONNECT may arrive as a normal response (with a body) rather than the 'connect' event.
    req.once('response', (res) => readResult(res, started).then(resolve, reject));
    req.once('connect', (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '', elapsedMs: Date.now() - started });
        return;
      }
      getOverSocket(socket, authority, path).then((r) => resolve({ ...r, headers: res.headers, elapsedMs: Date.now() - started }), reject);
    });
    req.end();
  });
}

/**
 * The `socks` library: SOCKS5 CONNECT with RFC 1929 user/password through the SOCKS5 listener, then a GET over
 * the tunnel. Rejects with the library's error when the proxy refuses (its message names the reply).
 */
export async function nodeSocksGet(
  socksPort: number,
  user: string,
  pass: string,
  targetPort: number,
  path = '/',
  timeoutMs = 30_000,
): Promise<HttpResult> {
  const started = Date.now();
  const { socket } = await SocksClient.createConnection({
    proxy: { host: '127.0.0.1', port: socksPort, type: 5, userId: user, password: pass },
    command: 'connect',
    destination: { host: '127.0.0.1', port: targetPort },
    timeout: timeoutMs,
  });
  const r = await getOverSocket(socket, `127.0.0.1:${targetPort}`, path);
  return { ...r, headers: {}, elapsedMs: Date.now() - started };
}

// ───────────────────────────── waiting ─────────────────────────────

/**
 * Polls `probe` until it returns a value other than undefined, or rejects after `timeoutMs`. A probe that
 * throws counts as "not yet" (its last error is in the timeout message): keep assertions out of probes.
 */
export function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 15_000,
  everyMs = 100,
): Promise<T> {
  return poll(probe, { what, timeoutMs, everyMs, ignoreErrors: true, done: (v) => v !== undefined });
}

// ───────────────────────────── static orders ─────────────────────────────

/** Opens one static instance of `productNo` through the admin API and waits for the order to finish with it. */
export async function openStaticInstance(gw: Gateway, productNo = 'STC-101-USA-SOCKS'): Promise<string> {
  const opened = await gw.admin<{ appOrderNo: string; status: number }>('/v1/orders/open', {
    body: { productNo, count: 1, cycleTimes: 1 },
  });
  if (opened.status !== 202) throw new Error(`POST /v1/orders/open answered ${opened.status}: ${JSON.stringify(opened.body)}`);
  const order = await waitFor('the static order to finish with its instance', async () => {
    const r = await gw.admin<{ status: number; instances?: Array<{ instanceNo: string; status: number | null }> }>(
      `/v1/orders/${opened.body.appOrderNo}`,
    );
    return r.body.status === 3 && r.body.instances?.[0]?.status === 3 ? r.body : undefined;
  });
  return order.instances![0]!.instanceNo;
}
