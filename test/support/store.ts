// Which store the tests run on. SQLite by default; with ROTOR_TEST_STORE=redis every test that opens its store
// through here runs on Redis instead, so the suite shows both drivers keep the same behaviour (issue 10).
// Redis: the server named by ROTOR_TEST_REDIS_URL (scripts/run-tests.mjs starts one for the whole run), else
// one redis-server started lazily for this test process and killed when the process exits. A test's SQLite
// path becomes a key prefix: the same file path maps to the same prefix (a reopen sees the same data, as a
// file would), ':memory:' to a fresh prefix, so tests never see each other's keys.
// Tests that depend on SQLite itself (a file shared with a SIGKILLed child, migrations) open SqliteStore
// directly and say so.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openRedisStore, SqliteStore, type Store } from '../../src/store/index.ts';
import { freePort, SetupError, waitForPort } from './ports.ts';

export type TestDriver = 'sqlite' | 'redis';

/** The driver this test process runs its stores on (env ROTOR_TEST_STORE: sqlite, the default, or redis). */
export const testDriver: TestDriver = (() => {
  const v = (process.env.ROTOR_TEST_STORE ?? 'sqlite').toLowerCase();
  if (v !== 'sqlite' && v !== 'redis') throw new SetupError(`ROTOR_TEST_STORE must be sqlite or redis, not ${v}`);
  return v;
})();

let ownServer: Promise<string> | undefined;

/** redis:// URL of the run's shared server, or of one started for this process (killed at exit). */
export function testRedisUrl(): Promise<string> {
  const shared = process.env.ROTOR_TEST_REDIS_URL;
  if (shared) return Promise.resolve(shared);
  ownServer ??= startOwnServer();
  return ownServer;
}

async function startOwnServer(): Promise<string> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'rotor-test-redis-'));
  const bin = process.env.ROTOR_REDIS_SERVER ?? 'redis-server';
  const child: ChildProcess = spawn(
    bin,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--loglevel', 'warning'],
    { stdio: 'ignore' },
  );
  // Never the reason the test process stays alive; it dies with the process.
  child.unref();
  const failed = new Promise<never>((_, reject) =>
    child.once('error', (e) =>
      reject(new SetupError(`${bin} did not start (${e.message}): install redis-server or set ROTOR_REDIS_SERVER`)),
    ),
  );
  failed.catch(() => undefined);
  process.once('exit', () => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  await Promise.race([waitForPort(port), failed]);
  return `redis://127.0.0.1:${port}`;
}

let fresh = 0;

/** The key prefix standing in for a SQLite path on Redis (stable for a file, unique for ':memory:'). */
export function redisPrefixFor(path: string): string {
  if (path === ':memory:' || path === '') return `t:${process.pid}:m${++fresh}:`;
  return `t:${createHash('sha256').update(path).digest('hex').slice(0, 16)}:`;
}

/**
 * A store for a test: SQLite at `path` (':memory:' by default), or on Redis under the prefix standing for
 * `path` when ROTOR_TEST_STORE=redis. `driver: 'sqlite'` pins SQLite for a test about the file itself.
 */
export async function openTestStore(path = ':memory:', options: { now?: () => number; driver?: TestDriver } = {}): Promise<Store> {
  const { driver = testDriver, ...rest } = options;
  if (driver === 'sqlite') return new SqliteStore(path, rest);
  // A test process is often busy for over a second on a loaded machine; its timers then run before the poll
  // that would read Redis's answer, and the product's 1 s command timeout fires on an answer already there.
  return openRedisStore(await testRedisUrl(), { prefix: redisPrefixFor(path), commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, ...rest });
}

/** Redis command timeout of the tests' stores (tests of the timeout itself open their own connections). */
const TEST_COMMAND_TIMEOUT_MS = 10_000;

/**
 * Allowance slice for daemons on the test Redis. The README's sizing rule (sliceBytes ≥ 2 × one user's peak
 * rate × Redis round trip) meets unpaced loopback downloads (hundreds of MB/s on a loaded 2-core box): with
 * the 1 MiB default a slice is spent before its refill lands and the user is cut early although allowance
 * is left (README, "Limits without Redis on the data path"). A fleet of one then behaves like one daemon;
 * test/fleet measures the bound with small slices and paced downloads.
 */
export const TEST_SLICE_BYTES = 64 * 1024 * 1024;

/**
 * The `store` (and, on Redis, `fleet`) part of a daemon config: `path` as given on SQLite; on Redis the
 * shared server's URL, which makes the daemon a fleet of one under its own prefix.
 */
export async function testStoreConfig(
  path = ':memory:',
): Promise<{ store: { path: string }; fleet?: { prefix: string; sliceBytes: number } }> {
  if (testDriver === 'sqlite') return { store: { path } };
  return { store: { path: await testRedisUrl() }, fleet: { prefix: redisPrefixFor(path), sliceBytes: TEST_SLICE_BYTES } };
}
