// `npm run bench:users`: a reseller's real size on the embedded SQLite store (or on Redis: --store redis), each target printed with its
// figure and whether it is met. One daemon (`rotor start` as `npm start` runs it, bench/daemon.ts) in a
// directory kept across its restarts, the embedded sandbox handing out Debian's microsocks as every drawn line:
//   import    100,000 users through POST /v1/users/batch, 1,000 rows per request (99,000 with passwords Rotor
//             generates, 1,000 with a chosen password given as an scrypt `passwordHash`)        ≤ 60 s
//   restart   SIGTERM, start again on the same store: spawn → 'rotor is ready'                  ≤ 5 s
//   restart   again with platform.sandbox.latencyMs = 20 (every platform call 20 ms later)      ≤ 5 s
//   page      GET /v1/users (the default page) at 100,000 users, worst of 20                      ≤ 50 ms
//   rss       idle RSS at 100,000 users, once the platform check ended (or ran 180 s)      ≤ 300 MiB
// Each restart phase runs once per --platform mode (default `process,embedded`):
//   process   the sandbox platform in a process of its own (bench/users-sim.ts, on the state file the import
//             left), the daemon in `platform.mode: remote` against it: the daemon's RSS and CPU are its own,
//             as beside a real platform. The RSS target is judged in this mode.
//   embedded  the sandbox inside the daemon (`platform.mode: embedded`, as `npm start` runs by default): its
//             100,000 sub accounts are in the daemon's heap; the RSS is printed (INFO), not judged.
// Not built yet: the first logins of 1,000 users after a restart, /metrics at 10,000 active users on a daemon
// (test/telemetry/metrics-bound.test.ts covers it on the registry) and 9,000 idle tunnels.
//
//   npm run bench:users -- [--users 100000] [--only restart,page,rss] [--platform process,embedded] [--dir DIR] [--profile DIR]
//                          [--node-flag F]... [--smoke] [--rounds N] [--latency 0,20] [--import-latency MS] [--base BUILD]
//
// --smoke: 2,000 users (checks the bench runs; the targets are for the full size). The import always runs unless
// --dir names a directory a previous run imported into (its users then count as --users); a new --dir is imported
// into and kept.
// --store redis: the daemons keep their state on a real redis-server started here (a fleet's store: users,
// usage, the connection log and the fleet's shared state in Redis) instead of SQLite. The sandbox then always
// runs in a process of its own (`--platform process`): an embedded sandbox keeps no state file beside a Redis
// store, and its sub accounts would be gone at the restart.
// The import always runs against the sandbox in a process of its own (on the state file an embedded sandbox
// reads beside a SQLite store): its line gives the daemon's and the sandbox's CPU and the platform calls made.
// --profile DIR: every daemon (the importing one and the restarted ones) writes a --cpu-prof profile into DIR, the
// import's sandbox process into DIR/sim (read them with bench/profile.ts).
// --import-latency MS: the import's sandbox answers every call MS later (a platform that far away; default 0).
// --rounds N: the restart phase N times on the one import (more figures per import; default 1). --latency: the
// platform latencies restarted with (ms; default 0,20).
// --base BUILD: each round also restarts another build (a directory holding bin/, dist/, package.json and
// node_modules, as bench/ab.ts takes) on the same store, the order alternating round by round: an A/B on one
// import, both under the same load. The summary gives each build's CPU until ready (what load moves least).
// --only resume (a phase of its own, with no import through the API): --users rows written straight into a new
// store as `rotor users import FILE --store` writes them (creation intents, src/users/store-import.ts), then a
// daemon started on it against a new sandbox process (--import-latency MS away) finishes them. Its line gives
// the time from the spawn until no intent is left in the store (read every 250 ms), the daemon's CPU by then,
// the sandbox's, the platform calls and the most at once. --rounds N runs it N times; --base BUILD alternates
// the two builds round by round, each on a store and a sandbox of its own.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { UpstreamDaemon } from '../test/support/upstreams.ts';
import { ensureBuilt, npmStartCommand, npmStartNodeFlags, SOCKS_PRODUCT, spawnRotor, type Daemon } from './daemon.ts';
import { BenchSetupError, cpuMs, rssBytes, startJsonChild, startMicrosocks, type Proc } from './procs.ts';
import { BENCH_PASSWORD, SOCKS_USER } from './spec.ts';
import { RedisServer, redisMissing } from '../test/fleet/redis-server.ts';
import Database from 'better-sqlite3';

const TOKEN = 'users-bench-token-5c1a';
const UP_USER = 'upuser';
const UP_PASS = 'up-pass';
const MiB = 1024 * 1024;
/** One chosen password for the login users, hashed once here (scrypt N=2^14, Rotor's format) and imported as their passwordHash. */
export const LOGIN_PASSWORD = 'login-users-chosen-pw';

const log = (line: string): void => void process.stdout.write(`${line}\n`);
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

interface Target {
  name: string;
  figure: string;
  target: string;
  /** undefined: a figure printed beside the judged ones (INFO). */
  met: boolean | undefined;
  note?: string;
}
const results: Target[] = [];
const verdict = (t: Target): string => (t.met === undefined ? 'INFO' : t.met ? 'MET ' : 'MISS');
function report(t: Target): void {
  results.push(t);
  log(`  ${verdict(t)} ${t.name}: ${t.figure} (target ${t.target})${t.note ? ` — ${t.note}` : ''}; load ${load()}`);
}

type PlatformMode = 'process' | 'embedded';
/** The sandbox in its own process (PlatformMode 'process'): where the daemon finds it. */
interface SimProcess {
  proc: Proc;
  baseUrl: string;
  appKey: string;
  appSecret: string;
}

const drawnLines = (upstream: UpstreamDaemon): Record<string, string[]> => ({
  [SOCKS_PRODUCT]: [`socks5://${UP_USER}:${UP_PASS}@127.0.0.1:${upstream.port}`],
});

/** bench/users-sim.ts on the directory's sandbox state file (the daemon's embedded sandbox keeps it beside the store). */
async function startSimProcess(dir: string, upstream: UpstreamDaemon, latencyMs: number, flags: string[] = []): Promise<SimProcess> {
  const options = { stateFile: join(dir, 'rotor.db.sandbox.json'), latencyMs, drawnLines: drawnLines(upstream) };
  const { info, proc } = await startJsonChild<{ pid: number; baseUrl: string; appKey: string; appSecret: string }>(
    process.execPath,
    [...flags, '--import', 'tsx', fileURLToPath(new URL('./users-sim.ts', import.meta.url)), JSON.stringify(options)],
    120_000,
  );
  return { proc, baseUrl: info.baseUrl, appKey: info.appKey, appSecret: info.appSecret };
}

/** The sandbox's count of calls per operation so far (GET /sim/calls). */
async function simCalls(sim: SimProcess): Promise<Record<string, number>> {
  const res = await fetch(`${sim.baseUrl}/sim/calls`);
  if (res.status !== 200) throw new BenchSetupError(`GET /sim/calls: ${res.status}`);
  return (await res.json()) as Record<string, number>;
}

/** Where the daemons keep their state: SQLite in the bench's directory, or a Redis URL (--store redis). */
let storePath = (dir: string): string => join(dir, 'rotor.db');

function configFor(dir: string, upstream: UpstreamDaemon, latencyMs: number, sim?: SimProcess): Record<string, unknown> {
  return {
    platform: sim
      ? { mode: 'remote', baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret }
      : { mode: 'embedded', sandbox: { latencyMs, drawnLines: drawnLines(upstream) } },
    proxy: { http: { host: '127.0.0.1', port: 0 }, socks5: { host: '127.0.0.1', port: 0 } },
    admin: { host: '127.0.0.1', port: 0, token: TOKEN },
    callback: { host: '127.0.0.1', port: 0 },
    store: { path: storePath(dir) },
    log: { level: 'info' },
    users: [
      {
        name: SOCKS_USER,
        password: BENCH_PASSWORD,
        mainAccount: 'bench',
        product: SOCKS_PRODUCT,
        draw: 'pwd',
        sessTime: 5,
        limitBytes: -1,
      },
    ],
    pool: { lowWater: 1, drawBatch: 1 },
  };
}

async function start(
  dir: string,
  upstream: UpstreamDaemon,
  latencyMs: number,
  flags: string[],
  sim?: SimProcess,
  root?: string,
): Promise<{ daemon: Daemon; readyMs: number; cpuMs: number }> {
  const started = performance.now();
  const daemon = await spawnRotor(
    () => configFor(dir, upstream, latencyMs, sim),
    [...npmStartNodeFlags(root), ...flags],
    300_000,
    npmStartCommand(root).env,
    {
      dir,
      ...(root !== undefined ? { root } : {}),
    },
  );
  // The CPU the start cost (user + sys, every thread): what a loaded machine changes least.
  return { daemon, readyMs: performance.now() - started, cpuMs: cpuMs(daemon.pid) };
}

const auth = { authorization: `Bearer ${TOKEN}` };

async function admin(d: Daemon, path: string, init: RequestInit = {}): Promise<{ status: number; body: string; headers: Headers }> {
  const res = await fetch(`http://127.0.0.1:${d.admin}${path}`, {
    ...init,
    headers: { ...auth, 'content-type': 'application/json', ...init.headers },
  });
  return { status: res.status, body: await res.text(), headers: res.headers };
}

export const userName = (n: number): string => `c${String(n).padStart(6, '0')}`;
/** The users with a chosen password (the first-login phase's users): the first `logins` names. */
const loginUser = (n: number, logins: number): boolean => n < logins;

async function importUsers(d: Daemon, count: number, logins: number, loginHash: string): Promise<number> {
  const started = performance.now();
  const periods = ['month', 'day', 'total'] as const;
  for (let from = 0; from < count; from += 1000) {
    const rows = [];
    for (let n = from; n < Math.min(count, from + 1000); n++) {
      rows.push({
        name: userName(n),
        mainAccount: 'bench',
        product: SOCKS_PRODUCT,
        quota: { bytes: 10 * 1024 ** 3, period: periods[n % 3] },
        ...(loginUser(n, logins) ? { passwordHash: loginHash } : {}),
      });
    }
    const res = await admin(d, '/v1/users/batch', { method: 'POST', body: JSON.stringify({ users: rows }) });
    const body = JSON.parse(res.body) as { created?: number; errors?: unknown[] };
    if (res.status !== 200 || body.created !== rows.length)
      throw new BenchSetupError(`batch at ${from}: ${res.status} ${res.body.slice(0, 300)}`);
    if ((from / 1000) % 10 === 9) log(`  ${from + 1000} users after ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  return performance.now() - started;
}

/**
 * `--only resume`: `count` users written into a new store as intents (what `rotor users import --store` writes),
 * then a daemon of `build` ('' = this checkout) started on it finishes them against a sandbox `latencyMs` away.
 */
async function resumeRound(
  count: number,
  upstream: UpstreamDaemon,
  latencyMs: number,
  flags: string[],
  onRedis: boolean,
  build: string,
): Promise<{ doneMs: number; cpuMs: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-bench-resume-'));
  const redis = onRedis ? await new RedisServer().start() : undefined;
  storePath = redis ? () => redis.url : (d) => join(d, 'rotor.db');
  let daemon: Daemon | undefined;
  let sim: SimProcess | undefined;
  let intents: (() => Promise<number>) | undefined;
  let closeIntents: (() => Promise<void>) | undefined;
  try {
    const { openStoreFor } = await import('../src/store/open.ts');
    const { importIntoStore } = await import('../src/users/store-import.ts');
    const periods = ['month', 'day', 'total'] as const;
    const rows = Array.from({ length: count }, (_, n) => ({
      name: userName(n),
      mainAccount: 'bench',
      product: SOCKS_PRODUCT,
      quota: { bytes: 10 * 1024 ** 3, period: periods[n % 3] },
    }));
    const store = await openStoreFor(storePath(dir));
    const written = await importIntoStore(store, rows, { reservedPorts: new Map(), configUsers: [SOCKS_USER], tls: false });
    await store.close();
    if (written.created !== count) throw new BenchSetupError(`store import: ${written.created} of ${count} written`);
    if (redis) {
      const reader = await openStoreFor(redis.url);
      intents = async () => (await reader.listUsers()).filter((u) => u.state === 'creating').length;
      closeIntents = () => reader.close();
    } else {
      const db = new Database(join(dir, 'rotor.db'), { readonly: true, fileMustExist: true });
      const q = db.prepare("SELECT count(*) AS n FROM users WHERE state = 'creating'");
      intents = () => Promise.resolve((q.get() as { n: number }).n);
      closeIntents = () => Promise.resolve(void db.close());
    }
    sim = await startSimProcess(dir, upstream, latencyMs);
    const simCpu0 = cpuMs(sim.proc.pid);
    const started = performance.now();
    daemon = (await start(dir, upstream, latencyMs, flags, sim, build || undefined)).daemon;
    const readyMs = performance.now() - started;
    for (;;) {
      if ((await intents()) === 0) break;
      if (performance.now() - started > 3_600_000) throw new BenchSetupError('intents left after an hour');
      await new Promise((r) => setTimeout(r, 250));
    }
    const doneMs = performance.now() - started;
    const [daemonCpu, simCpu] = [cpuMs(daemon.pid), cpuMs(sim.proc.pid) - simCpu0];
    const calls = Object.entries(await simCalls(sim))
      .filter(([, n]) => n > 0)
      .map(([op, n]) => `${op} ${n}`)
      .join(', ');
    const inFlight = (await (await fetch(`${sim.baseUrl}/sim/in-flight`)).json()) as { peak?: number };
    report({
      name: `resume ${count} stored intents (rotor users import --store), platform latency ${latencyMs} ms, store ${onRedis ? 'redis' : 'sqlite'}${build ? ` (--base ${build})` : ''}`,
      figure: `${(doneMs / 1000).toFixed(1)} s`,
      target: 'none',
      met: undefined,
      note: `ready after ${(readyMs / 1000).toFixed(2)} s; CPU by then: the daemon ${(daemonCpu / 1000).toFixed(2)} s, the sandbox ${(simCpu / 1000).toFixed(2)} s; platform calls: ${calls || 'none'}, at most ${inFlight.peak ?? '?'} at once`,
    });
    return { doneMs, cpuMs: daemonCpu };
  } finally {
    await daemon?.stop();
    await sim?.proc.stop();
    await closeIntents?.();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function waitPlatformCheck(d: Daemon, timeoutMs: number): Promise<number> {
  const started = performance.now();
  for (;;) {
    const text = (await admin(d, '/metrics')).body;
    const pending = Number(/^rotor_users_platform_check\{state="pending"\} (\S+)$/m.exec(text)?.[1] ?? NaN);
    if (pending === 0) return performance.now() - started;
    if (performance.now() - started > timeoutMs) return NaN;
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** On the restarted daemon: the default page of GET /v1/users, then the idle RSS once the background platform check is done. */
async function measureIdle(d: Daemon, count: number, only: Set<string>, mode: PlatformMode): Promise<void> {
  if (only.has('page')) {
    // The bench's own HTTP client loads and connects on its first request (tens of ms of this process, not of
    // the daemon): one probe first, so the first timed answer is the daemon's first GET /v1/users.
    await admin(d, '/healthz');
    const times: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      const res = await admin(d, '/v1/users');
      times.push(performance.now() - t);
      if (res.status !== 200 || res.headers.get('x-total-count') !== String(count + 1))
        throw new BenchSetupError(`GET /v1/users: ${res.status}, x-total-count ${res.headers.get('x-total-count')}`);
    }
    const sorted = [...times].sort((a, b) => a - b);
    report({
      name: `GET /v1/users default page at ${count} users, first / median / worst of 20, platform ${mode}`,
      figure: `${times[0]!.toFixed(1)} / ${sorted[10]!.toFixed(1)} / ${sorted[19]!.toFixed(1)} ms`,
      target: '≤ 50 ms',
      met: sorted[19]! <= 50,
    });
  }
  if (only.has('rss')) {
    const checkMs = await waitPlatformCheck(d, 180_000);
    log(
      Number.isNaN(checkMs)
        ? `  background platform check of ${count} users still running after 180 s: RSS read during it`
        : `  background platform check of ${count} users done ${(checkMs / 1000).toFixed(1)} s after the page phase`,
    );
    // Settled: the check's garbage collected as an idle daemon's would be.
    await new Promise((r) => setTimeout(r, 10_000));
    const rss = rssBytes(d.pid) / MiB;
    // Where it is: V8's heap (used / committed) from the daemon's own /metrics, and the kernel's anon / file split.
    const metrics = (await admin(d, '/metrics')).body;
    const gauge = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1] ?? NaN) / MiB;
    const status = readFileSync(`/proc/${d.pid}/status`, 'utf8');
    const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1] ?? NaN) / 1024;
    const where =
      `heap used ${gauge('rotor_nodejs_heap_size_used_bytes').toFixed(0)} / committed ${gauge('rotor_nodejs_heap_size_total_bytes').toFixed(0)} MiB, ` +
      `external ${gauge('rotor_nodejs_external_memory_bytes').toFixed(0)} MiB; RSS anon ${kb('RssAnon').toFixed(0)} / file ${kb('RssFile').toFixed(0)} MiB`;
    report({
      name:
        mode === 'process'
          ? `idle RSS at ${count} users, the daemon's (sandbox platform in its own process)`
          : `idle RSS at ${count} users, embedded sandbox included (not judged: the sandbox's 100,000 sub accounts are in it)`,
      figure: `${rss.toFixed(0)} MiB`,
      target: '≤ 300 MiB',
      met: mode === 'process' ? rss <= 300 : undefined,
      note: where,
    });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      users: { type: 'string' },
      only: { type: 'string' },
      profile: { type: 'string' },
      smoke: { type: 'boolean', default: false },
      dir: { type: 'string' },
      platform: { type: 'string', default: 'process,embedded' },
      store: { type: 'string', default: 'sqlite' },
      rounds: { type: 'string', default: '1' },
      latency: { type: 'string', default: '0,20' },
      'import-latency': { type: 'string', default: '0' },
      base: { type: 'string' },
      'node-flag': { type: 'string', multiple: true, default: [] },
    },
  });
  if (values.store !== 'sqlite' && values.store !== 'redis') throw new BenchSetupError(`--store: sqlite or redis, not ${values.store}`);
  const onRedis = values.store === 'redis';
  if (onRedis && redisMissing) throw new BenchSetupError(redisMissing);
  const modes = onRedis ? ['process' as const] : (values.platform.split(',') as PlatformMode[]);
  for (const m of modes)
    if (m !== 'process' && m !== 'embedded') throw new BenchSetupError(`--platform: unknown mode ${m} (process, embedded)`);
  const smoke = values.smoke;
  const count = Number(values.users ?? (smoke ? 2000 : 100_000));
  const logins = smoke ? 100 : 1000;
  const only = new Set((values.only ?? 'restart,page,rss').split(','));
  // --node-flag F: given to node after npm start's own (a V8 flag given twice: the last wins), e.g. an A/B of --max-semi-space-size.
  const flags = [
    ...values['node-flag'],
    ...(values.profile
      ? (mkdirSync(values.profile, { recursive: true }), ['--cpu-prof', `--cpu-prof-dir=${resolve(values.profile)}`])
      : []),
  ];
  ensureBuilt(log);
  const { hashPasswordAsync } = await import('../src/admission/password.ts');
  const loginHash = await hashPasswordAsync(LOGIN_PASSWORD);
  const upstream = await startMicrosocks(UP_USER, UP_PASS);
  // --dir: a directory a previous run imported into (kept): the import is skipped.
  const dir = values.dir ?? mkdtempSync(join(tmpdir(), 'rotor-bench-users-'));
  mkdirSync(dir, { recursive: true });
  let daemon: Daemon | undefined;
  let sim: SimProcess | undefined;
  const redis = onRedis ? await new RedisServer().start() : undefined;
  if (redis) storePath = () => redis.url;
  try {
    log(`bench:users, ${count} users, store ${values.store}, load ${load()}`);
    if (only.has('resume')) {
      // A phase of its own: a store and a sandbox per round, no import through the API.
      const rounds = Math.max(1, Number(values.rounds));
      const builds = values.base !== undefined ? ['', resolve(values.base)] : [''];
      const of = new Map<string, { doneMs: number; cpuMs: number }[]>();
      for (let round = 0; round < rounds; round++)
        for (const build of round % 2 === 0 ? builds : [...builds].reverse()) {
          const r = await resumeRound(count, upstream, Number(values['import-latency']), flags, onRedis, build);
          of.set(build || 'this checkout', [...(of.get(build || 'this checkout') ?? []), r]);
        }
      for (const [key, runs] of of)
        log(`resume, ${key}: ${runs.map((r) => `${(r.doneMs / 1000).toFixed(1)} s (CPU ${(r.cpuMs / 1000).toFixed(2)} s)`).join(', ')}`);
    } else if (redis || values.dir === undefined || !existsSync(join(dir, 'rotor.db'))) {
      // The import's sandbox always runs in a process of its own (on the state file an embedded sandbox keeps
      // beside a SQLite store, so the restarts of either mode find its sub accounts): the daemon's CPU is its
      // own, and the platform's calls and CPU per user are counted apart.
      const simFlags = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(resolve(values.profile), 'sim')}`] : [];
      const importLatency = Number(values['import-latency']);
      sim = await startSimProcess(dir, upstream, importLatency, simFlags);
      daemon = (await start(dir, upstream, importLatency, flags, sim)).daemon;
      const [daemonCpu0, simCpu0] = [cpuMs(daemon.pid), cpuMs(sim.proc.pid)];
      const callsBefore = await simCalls(sim);
      const importMs = await importUsers(daemon, count, logins, loginHash);
      const [daemonCpu, simCpu] = [cpuMs(daemon.pid) - daemonCpu0, cpuMs(sim.proc.pid) - simCpu0];
      const callsAfter = await simCalls(sim);
      const inFlight = (await (await fetch(`${sim.baseUrl}/sim/in-flight`)).json()) as { peak?: number };
      const calls = Object.entries(callsAfter)
        .map(([op, n]) => [op, n - (callsBefore[op] ?? 0)] as const)
        .filter(([, n]) => n > 0)
        .map(([op, n]) => `${op} ${n}`)
        .join(', ');
      report({
        name: `import ${count} users (POST /v1/users/batch, 1,000 a request)${importLatency > 0 ? `, platform latency ${importLatency} ms` : ''}`,
        figure: `${(importMs / 1000).toFixed(1)} s`,
        target: '≤ 60 s',
        met: importMs <= 60_000,
        note: `CPU during the import: the daemon ${(daemonCpu / 1000).toFixed(2)} s, the sandbox ${(simCpu / 1000).toFixed(2)} s; platform calls: ${calls || 'none'}, at most ${inFlight.peak ?? '?'} at once`,
      });
      await daemon.stop();
      daemon = undefined;
      await sim?.proc.stop();
      sim = undefined;
    }

    const rounds = Math.max(1, Number(values.rounds));
    const latencies = values.latency.split(',').map(Number);
    // This checkout's build ('' below), and --base's when given, alternating which goes first.
    const builds = values.base !== undefined ? ['', resolve(values.base)] : [''];
    const cpuOf = new Map<string, number[]>();
    if (only.has('restart') && !only.has('resume')) {
      for (let round = 0; round < rounds; round++) {
        for (const build of round % 2 === 0 ? builds : [...builds].reverse()) {
          for (const mode of modes) {
            for (const latencyMs of latencies) {
              sim = mode === 'process' ? await startSimProcess(dir, upstream, latencyMs) : undefined;
              const r = await start(dir, upstream, latencyMs, flags, sim, build || undefined);
              daemon = r.daemon;
              const label = build ? ` (--base ${build})` : '';
              report({
                name: `ready after restart, ${count} users, platform latency ${latencyMs} ms, platform ${mode}, store ${values.store}${label}`,
                figure: `${(r.readyMs / 1000).toFixed(2)} s`,
                target: '≤ 5 s',
                met: r.readyMs <= 5000,
                note: `the daemon's CPU until ready ${(r.cpuMs / 1000).toFixed(2)} s`,
              });
              const key = `${build || 'this checkout'}, platform latency ${latencyMs} ms`;
              cpuOf.set(key, [...(cpuOf.get(key) ?? []), r.cpuMs]);
              if (latencyMs === 0 && round === 0 && !build) await measureIdle(daemon, count, only, mode);
              await daemon.stop();
              daemon = undefined;
              await sim?.proc.stop();
              sim = undefined;
            }
          }
        }
      }
    }
    if (rounds > 1 || builds.length > 1)
      for (const [key, cpu] of cpuOf) {
        const sorted = [...cpu].sort((a, b) => a - b);
        log(
          `CPU until ready, ${key}: ${cpu.map((c) => (c / 1000).toFixed(2)).join(' ')} s (median ${(sorted[sorted.length >> 1]! / 1000).toFixed(2)} s)`,
        );
      }
  } finally {
    await daemon?.stop();
    await sim?.proc.stop();
    await upstream.stop();
    await redis?.stop();
    if (values.dir === undefined) rmSync(dir, { recursive: true, force: true });
  }
  log('');
  for (const t of results) log(`${verdict(t)} | ${t.name} | ${t.figure} | ${t.target}${t.note ? ` | ${t.note}` : ''}`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
