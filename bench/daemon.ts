// The daemon as users run it, for the bench: `bin/rotor.js start` in its own process with a config of its
// own: the embedded sandbox platform told (platform.sandbox.drawnLines) to hand out the bench's upstreams as
// drawn lines, so the pools fill by DrawByPwd like production; accounting on a SQLite store; metrics served.
//   user `bh` (product DYN-104-FLOW) draws the HTTP upstream (squid),
//   user `bs` (product DYN-105-FLOW) draws the SOCKS5 upstream (microsocks).
// Ready when the log says 'rotor is ready' (listener ports read from that line).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { stopChild, type UpstreamDaemon } from '../test/support/upstreams.ts';
import { BenchSetupError, type Proc } from './procs.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
export const HTTP_PRODUCT = 'DYN-104-FLOW';
export const SOCKS_PRODUCT = 'DYN-105-FLOW';

export interface Daemon extends Proc {
  http: number;
  socks5: number;
  admin: number;
  /** Everything the daemon logged. */
  output(): string;
}

// A password draw never yields a node without credentials (issue 19: a line without them is dropped), so an
// upstream that takes none (squid here ignores what it is sent) is handed out with placeholder credentials.
function userUrl(protocol: 'http' | 'socks5', u: UpstreamDaemon): string {
  const auth = u.username ? `${encodeURIComponent(u.username)}:${encodeURIComponent(u.password)}@` : 'bench:unused@';
  return `${protocol}://${auth}127.0.0.1:${u.port}`;
}

export function benchConfig(http: UpstreamDaemon, socks: UpstreamDaemon, storePath: string): Record<string, unknown> {
  const user = (name: string, product: string) => ({
    name,
    password: BENCH_PASSWORD,
    mainAccount: 'bench',
    product,
    draw: 'pwd',
    sessTime: 5,
    limitBytes: -1,
  });
  return {
    platform: {
      mode: 'embedded',
      sandbox: { drawnLines: { [HTTP_PRODUCT]: [userUrl('http', http)], [SOCKS_PRODUCT]: [userUrl('socks5', socks)] } },
    },
    proxy: {
      http: { host: '127.0.0.1', port: 0 },
      socks5: { host: '127.0.0.1', port: 0 },
      // ROTOR_BENCH_RULES=1: a request rule that applies to every request and never fires (status 418), to
      // measure what evaluating rules costs the data path (docs/benchmarks.md).
      ...(process.env.ROTOR_BENCH_RULES === '1' ? { requestRules: [{ status: [418], action: 'retry_ban' }] } : {}),
      // ROTOR_BENCH_UNSENT=<bytes>: proxy.clientUnsentBytes (0 = the kernel's own send buffer), for its A/B on M3.
      ...(process.env.ROTOR_BENCH_UNSENT ? { clientUnsentBytes: Number(process.env.ROTOR_BENCH_UNSENT) } : {}),
    },
    admin: { host: '127.0.0.1', port: 0 },
    callback: { host: '127.0.0.1', port: 0 },
    store: { path: storePath },
    log: { level: 'info' },
    users: [user(HTTP_USER, HTTP_PRODUCT), user(SOCKS_USER, SOCKS_PRODUCT)],
    // One upstream per product: one node is all a draw can yield, so a low water of 1 keeps the pool from
    // drawing again and again in the background.
    pool: { lowWater: 1, drawBatch: 1 },
  };
}

/** `over` merged into `base`, objects key by key (anything else replaced). */
function merged(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    const plain = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
    out[k] = plain(b) && plain(v) ? merged(b, v) : v;
  }
  return out;
}

/**
 * A build's config for the bench: `base` with the build directory's ab-config.json merged over it when there is one
 * (the same build with one setting changed, to measure what the setting costs).
 */
export function withBuildConfig(root: string, base: Record<string, unknown>): Record<string, unknown> {
  const extra = join(root, 'ab-config.json');
  return existsSync(extra) ? merged(base, JSON.parse(readFileSync(extra, 'utf8')) as Record<string, unknown>) : base;
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * `rotor start` runs dist/ (bin/rotor.js): a dist older than the sources would measure old code, so it is
 * rebuilt first (`npm run build`), as `npm install` would have.
 */
export function ensureBuilt(log: (text: string) => void): void {
  const cli = join(ROOT, 'dist', 'cli.js');
  const fresh = (): boolean => existsSync(cli) && statSync(cli).mtimeMs >= newestMtime(join(ROOT, 'src'));
  if (fresh()) return;
  const release = buildLock(log);
  try {
    // Built meanwhile by the holder of the lock.
    if (fresh()) return;
    log('dist/ is missing or older than src/: building it (npm run build)');
    execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.build.json')], {
      stdio: 'inherit',
    });
  } finally {
    release();
  }
}

/**
 * One build of dist/ at a time per checkout: `npm test` runs two bench files at once, and two tsc runs over
 * the same dist/ doubled the CPU and wrote the same files under each other. The lock is a directory (mkdir
 * is atomic) holding the builder's pid; a lock whose process is gone is taken over.
 */
function buildLock(log: (text: string) => void): () => void {
  const lock = join(ROOT, '.tmp', 'dist-build.lock');
  mkdirSync(join(ROOT, '.tmp'), { recursive: true });
  const nap = new Int32Array(new SharedArrayBuffer(4));
  let told = false;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      return () => rmSync(lock, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (!holderAlive(lock)) {
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    if (!told) log('waiting for the build of dist/ another process is running');
    told = true;
    // A synchronous wait (ensureBuilt is synchronous, as the build is).
    Atomics.wait(nap, 0, 0, 250);
  }
}

function holderAlive(lock: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(lock, 'pid'), 'utf8'));
  } catch {
    // Made but its pid not written yet: give the holder a moment, unless the lock is old.
    try {
      return Date.now() - statSync(lock).mtimeMs < 5000;
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * `npm start` as package.json's scripts.start spells it, `[NAME=value ...] node [options] bin/rotor.js start`:
 * the environment it sets (glibc's malloc settings) and the node options (a V8 heap setting), so the bench
 * measures the daemon as shipped; the Docker image's ENV and ENTRYPOINT carry the same. `root`: the checkout
 * whose package.json to read (bench/ab.ts runs other builds as their own `npm start` did).
 */
export function npmStartCommand(root = ROOT): { env: Record<string, string>; nodeFlags: string[] } {
  const start = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts?: { start?: string } }).scripts?.start ?? '';
  const m = /^((?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)node\s+(.*?)\s*bin\/rotor\.js\b/.exec(start);
  if (!m) throw new BenchSetupError(`package.json scripts.start is not "[NAME=value ...] node [options] bin/rotor.js ...": ${start}`);
  const env = Object.fromEntries(
    m[1]!
      .split(/\s+/)
      .filter(Boolean)
      .map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]),
  );
  return { env, nodeFlags: m[2]!.split(/\s+/).filter(Boolean) };
}

/**
 * A gateway named on a bench tool's command line: `DIR` or `DIR@N` (`minimal@N` too), N the young generation's
 * semi-space in MiB to run it with instead of its own (`npm start`'s for a build, node's default for the minimal).
 */
export function parseGatewaySpec(spec: string): { which: string; semiSpace: string | undefined } {
  const m = /^(.+)@(\d+)$/.exec(spec);
  return m ? { which: m[1]!, semiSpace: m[2]! } : { which: spec, semiSpace: undefined };
}

/** `flags` with its --max-semi-space-size replaced by `semiSpace` MiB (unchanged when undefined). */
export function withSemiSpace(flags: string[], semiSpace: string | undefined): string[] {
  if (semiSpace === undefined) return flags;
  return [...flags.filter((f) => !f.startsWith('--max-semi-space-size')), `--max-semi-space-size=${semiSpace}`];
}

export function npmStartNodeFlags(root = ROOT): string[] {
  return npmStartCommand(root).nodeFlags;
}

/** `npm start` in words: its environment and node options, for the reports. */
export function describeNpmStart(root = ROOT): string {
  const { env, nodeFlags } = npmStartCommand(root);
  return [...Object.entries(env).map(([k, v]) => `${k}=${v}`), 'node', ...nodeFlags].join(' ');
}

/**
 * Starts `rotor start` on the bench's config as `npm start` runs it; `nodeFlags` go to node as well (e.g. --cpu-prof).
 * `root`: the build to run (a directory holding bin/, dist/ and package.json, as bench/ab.ts takes); default this checkout.
 */
export function startDaemon(
  http: UpstreamDaemon,
  socks: UpstreamDaemon,
  nodeFlags: string[] = [],
  readyTimeoutMs = 60_000,
  root = ROOT,
): Promise<Daemon> {
  return spawnRotor(
    (dir) => withBuildConfig(root, benchConfig(http, socks, join(dir, 'rotor.db'))),
    [...npmStartNodeFlags(root), ...nodeFlags],
    readyTimeoutMs,
    npmStartCommand(root).env,
    { root },
  );
}

/**
 * Starts `bin/rotor.js start` in a temp dir of its own (its cwd, removed when it stops) with the config
 * `configFor(dir)` returns written as YAML; resolves when it logs 'rotor is ready'. Its listen ports should be
 * 0: the actual ports are read from that line. `env` is set over the inherited environment (as npm start's
 * `NAME=value` prefix is).
 */
export async function spawnRotor(
  configFor: (dir: string) => Record<string, unknown>,
  nodeFlags: string[] = [],
  readyTimeoutMs = 60_000,
  env: Record<string, string> = {},
  /**
   * `dir`: run in this directory and keep it (a restart on the same store); by default a temp dir removed at stop.
   * `root`: the build to run (a directory holding bin/ and dist/, as bench/ab.ts takes); default this checkout.
   */
  options: { dir?: string; root?: string } = {},
): Promise<Daemon> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'rotor-bench-daemon-'));
  const config = join(dir, 'rotor.yaml');
  writeFileSync(config, stringify(configFor(dir)));
  const childEnv = { ...process.env } as Record<string, string>;
  for (const k of Object.keys(childEnv)) if (k.startsWith('ROTOR_')) delete childEnv[k];
  Object.assign(childEnv, env, { ROTOR_CONFIG: config });
  const child = spawn(process.execPath, [...nodeFlags, join(options.root ?? ROOT, 'bin', 'rotor.js'), 'start'], {
    cwd: dir,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const cleanup = (): void => {
    if (options.dir === undefined) rmSync(dir, { recursive: true, force: true });
  };
  const ports = await new Promise<{ http: number; socks5: number; admin: number }>((resolveReady, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new BenchSetupError(`rotor start was not ready within ${readyTimeoutMs} ms:\n${out.slice(-2000)}`));
    }, readyTimeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      cleanup();
      reject(new BenchSetupError(`rotor start exited (${code}) before it was ready:\n${out.slice(-2000)}`));
    });
    let ready = false;
    const onData = (chunk: Buffer): void => {
      out += chunk.toString('utf8');
      if (ready) {
        // Keep the tail only: a long run must not grow the bench's memory with the daemon's log.
        if (out.length > 256 * 1024) out = out.slice(-64 * 1024);
        return;
      }
      const at = out.indexOf('rotor is ready');
      if (at < 0) return;
      const start = out.lastIndexOf('\n', at) + 1;
      const end = out.indexOf('\n', at);
      if (end < 0) return;
      const rec = JSON.parse(out.slice(start, end)) as { http: { port: number }; socks5: { port: number }; admin: number };
      ready = true;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      resolveReady({ http: rec.http.port, socks5: rec.socks5.port, admin: rec.admin });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => (out += c.toString('utf8')));
  });
  return {
    pid: child.pid!,
    ...ports,
    output: () => out,
    stop: async () => {
      await stopChild(child, 15_000);
      cleanup();
    },
  };
}
