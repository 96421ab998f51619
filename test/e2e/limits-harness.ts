// Helpers for the limits and operator end-to-end tests, beside harness.ts (startGateway, via*, metricValue):
// the daemon as a child process (`rotor start --config FILE`, the real CLI with its signal handling), a
// loopback target that serves any number of bytes, curl and raw-socket clients, and admin/metrics readers.
// Everything listens on 127.0.0.1 port 0; every store lives in a temp dir removed by `cleanup()`.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import type { ConfigInput } from '../../src/config/index.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import { poll } from '../support/wait.ts';
import { runCurl } from '../support/curl.ts';
import { findSample } from '../support/prometheus.ts';
import { launchRotor } from '../support/rotor-process.ts';
import { startHttpTarget } from '../support/target.ts';

export const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const MB5 = 5 * 1024 * 1024;
export const CHUNK = 64 * 1024;

const dirs: string[] = [];
/** A fresh temp dir, removed by cleanup(). */
export function tempDir(prefix = 'rotor-e2e-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}
export function cleanup(): void {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

export interface TestUser {
  name: string;
  password: string;
  mainAccount: string;
  draw?: 'pwd' | 'api';
  product?: string;
  limitBytes?: number;
}

/** A raw config for a child's YAML file: every listener on port 0, the store in `dir`, logs at info. */
export function rawConfig(
  dir: string,
  users: TestUser[],
  extra: {
    accounts?: Record<string, unknown>;
    admin?: Record<string, unknown>;
    log?: string;
    store?: { store: { path: string }; fleet?: Record<string, unknown> };
  } = {},
): ConfigInput {
  return {
    platform: { mode: 'embedded' },
    proxy: {
      http: { host: '127.0.0.1', port: 0 },
      socks5: { host: '127.0.0.1', port: 0 },
      connectTimeoutMs: 3000,
      handshakeTimeoutMs: 3000,
    },
    admin: { host: '127.0.0.1', port: 0, ...(extra.admin ?? {}) },
    callback: { host: '127.0.0.1', port: 0 },
    // `extra.store`: testStoreConfig()'s answer (test/support/store.ts) to follow ROTOR_TEST_STORE.
    ...(extra.store ?? { store: { path: join(dir, 'rotor.db') } }),
    // The child's ready line (and its ports) is an info line.
    log: { level: (extra.log ?? 'info') as 'info' },
    users: users.map((u) => ({ draw: 'pwd', product: '', limitBytes: -1, sessTime: 5, ...u })),
    pool: { lowWater: 1, drawBatch: 2 },
    orders: { pollInitialMs: 100, pollMaxMs: 500, sweepMs: 1000 },
    accounts: { balancePollMs: 60_000, limitSyncMs: 60_000, flushIntervalMs: 500, ...(extra.accounts ?? {}) },
  } as ConfigInput;
}

/**
 * GET /bytes/<n>[?rate=<bytes per second>]: n bytes of 'a' in 16 KiB writes paced by the reader, or — with
 * `rate` — by the server's own clock (so a download really is slow at the source: kernel buffers along a
 * proxy chain would otherwise swallow megabytes ahead of a slow client). Anything else: 404.
 */
export interface BytesTarget {
  port: number;
  url: (bytes: number, rate?: number) => string;
  close: () => Promise<void>;
}

export async function startTarget(): Promise<BytesTarget> {
  const t = await startHttpTarget();
  return { port: t.port, url: (bytes, rate) => t.url(`/bytes/${bytes}${rate ? `?rate=${rate}` : ''}`), close: () => t.close() };
}

export interface CurlResult {
  /** curl's exit code (0 ok; 56 recv failure / CONNECT refused; 97 SOCKS5 refusal; 18 partial) */
  code: number;
  /** body bytes received */
  size: number;
  /** final HTTP status (0 when none) */
  http: number;
  /** the CONNECT answer's status (curl -p), 0 when none */
  connect: number;
  stderr: string;
  /** the body, when `body: true` */
  body: string;
  ms: number;
}

/** Runs curl quietly; `-w` reports size, status and CONNECT status. The body is discarded unless asked for. */
export async function curl(args: string[], options: { body?: boolean; maxTimeS?: number } = {}): Promise<CurlResult> {
  const r = await runCurl([...(options.body ? [] : ['-o', '/dev/null']), ...args], {
    maxTimeS: options.maxTimeS ?? 20,
    report: true,
    encoding: 'latin1',
  });
  return { code: r.exitCode, size: r.size, http: r.status, connect: r.connectStatus, stderr: r.stderr, body: r.stdout, ms: r.elapsedMs };
}

/**
 * A SOCKS5 CONNECT (Rotor's own client, src/wire/socks5-client.ts) to 127.0.0.1:`targetPort`; resolves the
 * server's reply code: 0 success, the REP of a refused CONNECT, or 0x101 when the user/password step fails.
 */
export function socks5ReplyCode(port: number, user: string, pass: string, targetPort: number, timeoutMs = 5000): Promise<number> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no SOCKS5 reply within ${timeoutMs} ms`));
    }, timeoutMs);
    const finish = (result: number | Error): void => {
      clearTimeout(timer);
      s.destroy();
      if (typeof result === 'number') resolve(result);
      else reject(result);
    };
    s.once('error', finish);
    s.once('connect', () => {
      socks5Connect(s, { host: '127.0.0.1', port: targetPort }, { username: user, password: pass }, (err) => {
        if (!err) finish(0);
        else if (err.code === 'REJECTED' && err.reply !== undefined) finish(err.reply);
        else if (err.code === 'AUTH_FAILED') finish(0x101);
        else finish(err);
      });
    });
  });
}

export async function adminGet<T = unknown>(port: number, path: string, token?: string): Promise<T> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const text = await res.text();
  if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

export async function adminSend<T = unknown>(
  port: number,
  method: string,
  path: string,
  body: unknown,
  token?: string,
): Promise<{ status: number; body: T }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: {
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

export interface UserRow {
  name: string;
  usedBytes: number;
  limitBytes: number;
  activeConnections: number;
}

export async function userRow(adminPort: number, name: string, token?: string): Promise<UserRow> {
  const rows = await adminGet<UserRow[]>(adminPort, '/v1/users', token);
  const row = rows.find((r) => r.name === name);
  if (!row) throw new Error(`user ${name} not in GET /v1/users`);
  return row;
}

export async function scrape(adminPort: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${adminPort}/metrics`);
  return res.text();
}

/** Value of one sample `name{labels}` in Prometheus text (labels matched as a subset); undefined if absent. */
export const sample = findSample;

/** Polls `check` until it returns a value other than undefined/false, or throws after `timeoutMs`. */
export function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 5000,
  everyMs = 50,
): Promise<T> {
  return poll(check, { what, timeoutMs, everyMs, ignoreErrors: true, done: (v) => v !== undefined && v !== false });
}

// ---------------------------------------------------------------------------------------------------------
// The daemon as a child process: `node --import tsx src/cli.ts start --config FILE`, stdout+stderr (pino
// JSON) to a log file. Ports come from the "rotor is ready" line (the config asks for port 0).

export interface ChildDaemon {
  child: ChildProcess;
  pid: number;
  ports: { http: number; socks5: number; admin: number; callback: number };
  logFile: string;
  /** parsed JSON log lines so far (non-JSON lines as {raw}) */
  lines(): Array<Record<string, unknown>>;
  logText(): string;
  signal(sig: NodeJS.Signals): void;
  /** resolves with the exit code/signal */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM and wait (SIGKILL after `ms`) */
  stop(ms?: number): Promise<void>;
}

export function writeConfigFile(file: string, raw: ConfigInput | Record<string, unknown>): void {
  writeFileSync(file, stringify(raw));
}

export async function spawnDaemon(configFile: string, logFile: string, env: Record<string, string> = {}): Promise<ChildDaemon> {
  const d = await launchRotor({ args: ['--config', configFile], logFile, env });
  return {
    child: d.child,
    pid: d.pid,
    ports: d.ports,
    logFile,
    lines: d.lines,
    logText: d.output,
    signal: d.signal,
    exited: d.exited,
    async stop(ms = 15_000) {
      await d.stop('SIGTERM', ms);
    },
  };
}
