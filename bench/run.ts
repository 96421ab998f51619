// `npm run bench`: the real daemon against the direct path and a minimal Node gateway, on loopback (issue 14).
//
//   direct:  client -> upstream (squid for HTTP and CONNECT, microsocks for SOCKS5) -> target
//   minimal: client -> bench/minimal.ts (one user, one fixed upstream, pipe()) -> upstream -> target
//   rotor:   client -> `rotor start` (bench/daemon.ts: embedded sandbox handing out the same upstreams as
//            drawn lines, accounting on its store, metrics) -> upstream -> target
//
// Every case runs the three paths in the same run, interleaved (the order rotates each repetition), and
// reports the medians and the ratios Rotor/direct and Rotor/minimal. The target (bench/target.ts), the load
// client (bench/client.ts), the minimal gateway and Rotor are separate processes; wrk drives M1.
//
//   npm run bench [-- --full | --smoke] [--case M1,M3] [--reps N] [--profile DIR] [--out FILE] [--json FILE] [--note TEXT]
//                 [--rotor-node-flag FLAG]... [--build DIR] [--cpu-detail] [--warmup SECONDS] [--one-rate SHARE] [--rtt MS]
//
// Without flags: quick sizes, 3 repetitions, and the results block of docs/benchmarks.md is rewritten;
// otherwise the docs are written only when --out names a file. --profile writes the daemon's --cpu-prof
// profiles into DIR. --build runs that Rotor build (bin/, dist/, package.json, as bench/ab.ts takes) instead of
// this checkout's. --cpu-detail prints every measured window behind the CPU table. --warmup: each gateway's
// unrecorded warm-up of M1, M2 and M4 lasts at least this long (default 10 s; 0 in --smoke). --one-rate: after
// each repetition's M2, every path again at one offered rate, SHARE of the slowest path's M2 rate (default 0.6,
// 0 to skip), for the CPU table: CPU per tunnel with every gateway doing the same work per second. bench/gateway.ts (the
// listeners alone, in-memory meters) stays as a profiling aid.
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { BulkResult, ClientJob, ClientReply, HoldResult, LatencyResult, ProxySpec, RateResult, UseResult } from './client.ts';
import { describeNpmStart, ensureBuilt, startDaemon } from './daemon.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';
import { CPU_HEADERS, CPU_NUMERIC, cpuDetailRows, cpuRows, DETAIL_HEADERS, type CpuWindow, type Role } from './cpu-table.ts';
import { cpuMs, rssBytes, startJsonChild, startMicrosocks, startSquid, threadCpuMs, type Proc, type Upstream } from './procs.ts';
import { fmt, median } from './stats.ts';
import { runWrk } from './wrk.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const UP_USER = 'upuser';
const UP_PASS = 'up-pass';
const CASES = ['M1', 'M2', 'M3', 'M4', 'M5'] as const;
type CaseId = (typeof CASES)[number];
const PATHS = ['direct', 'minimal', 'rotor'] as const;
type Path = (typeof PATHS)[number];
type Proto = 'connect' | 'socks5';

interface Settings {
  m1Seconds: number;
  m1Connections: number;
  m2Ms: number;
  m2Concurrency: number;
  m3Bytes: number;
  m4Count: number;
  m5Count: number;
  reps: number;
  /** Waits for RSS to settle: before the idle figure (this), around M5's tunnels (0.3x, 0.5x). */
  settleMs: number;
}

const FULL: Settings = {
  m1Seconds: 5,
  m1Connections: 50,
  m2Ms: 5000,
  m2Concurrency: 32,
  m3Bytes: 1024 ** 3,
  m4Count: 500,
  m5Count: 1000,
  reps: 3,
  settleMs: 1000,
};
// M3 moves the full size here too: 128 MiB crossed loopback in 40-150 ms, a window a scheduler's hiccup decides.
const QUICK: Settings = { ...FULL, m1Seconds: 2, m2Ms: 2000, m4Count: 100, m5Count: 200 };
const SMOKE: Settings = {
  ...FULL,
  m1Seconds: 1,
  m1Connections: 10,
  m2Ms: 300,
  m2Concurrency: 8,
  m3Bytes: 4 * 1024 ** 2,
  m4Count: 10,
  m5Count: 10,
  reps: 1,
  // CI's run proves every case yields a number; the RSS figures are not read there.
  settleMs: 100,
};

export interface Row {
  case: CaseId;
  name: string;
  unit: string;
  direct: number;
  minimal: number;
  rotor: number;
  /** rotor / direct */
  ratio: number;
  /** rotor / minimal */
  ratioMinimal: number;
  /** rotor - direct, for latencies */
  added?: number;
  /** minimal - direct, for latencies */
  addedMinimal?: number;
  target: string;
  /** null: no target for this row */
  met: boolean | null;
  /** failed operations over all samples, both paths */
  errors: number;
  note?: string;
}

class BenchError extends Error {
  readonly code = 'BENCH_FAILED';
}

function parseFlags(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: {
      full: { type: 'boolean', default: false },
      smoke: { type: 'boolean', default: false },
      case: { type: 'string', multiple: true },
      reps: { type: 'string' },
      profile: { type: 'string' },
      out: { type: 'string' },
      json: { type: 'string' },
      note: { type: 'string' },
      // every measured window of the gateways: operations, rate, CPU (the table's sums are over these)
      'cpu-detail': { type: 'boolean', default: false },
      // the Rotor build to run: a directory holding bin/, dist/ and package.json, as bench/ab.ts takes (default: this checkout)
      build: { type: 'string' },
      // node options for the daemon's process only (e.g. a V8 heap setting under test); repeatable.
      'rotor-node-flag': { type: 'string', multiple: true },
      // upstream distance mode (bench/rtt.ts): the upstreams this many ms away; prints its own table
      rtt: { type: 'string' },
      // seconds of warm-up at least, per case the CPU table covers and gateway (the JIT's tiers settle in ~10 s)
      warmup: { type: 'string' },
      // M2 again at one offered rate for every path, this share of the slowest path's M2 rate (0: not run); CPU table only
      'one-rate': { type: 'string' },
    },
    strict: true,
  });
  const settings = { ...(values.smoke ? SMOKE : values.full ? FULL : QUICK) };
  if (values.reps !== undefined) {
    const n = Number(values.reps);
    if (!Number.isInteger(n) || n < 1) throw new BenchError('--reps takes a whole number >= 1');
    settings.reps = n;
  }
  const cases = (values.case ?? [])
    .flatMap((c) => c.split(','))
    .map((c) => c.trim().toUpperCase())
    .filter(Boolean);
  for (const c of cases) if (!(CASES as readonly string[]).includes(c)) throw new BenchError(`unknown case ${c} (M1..M5)`);
  const selected = cases.length > 0 ? (cases as CaseId[]) : [...CASES];
  const published = !values.smoke && cases.length === 0 && values.reps === undefined;
  const out = values.out ?? (published ? join(ROOT, 'docs', 'benchmarks.md') : undefined);
  const warmupSeconds = values.warmup === undefined ? (values.smoke ? 0 : 10) : Number(values.warmup);
  if (!Number.isFinite(warmupSeconds) || warmupSeconds < 0 || warmupSeconds > 600) throw new BenchError('--warmup takes seconds, 0..600');
  const oneRateShare = values['one-rate'] === undefined ? 0.6 : Number(values['one-rate']);
  if (!(oneRateShare >= 0 && oneRateShare <= 1)) throw new BenchError('--one-rate takes a share of the slowest M2 rate, 0..1');
  return {
    settings,
    cases: selected,
    profile: values.profile ? resolve(values.profile) : undefined,
    out,
    json: values.json,
    note: values.note,
    cpuDetail: values['cpu-detail'],
    build: values.build === undefined ? undefined : resolve(values.build),
    rotorNodeFlags: values['rotor-node-flag'] ?? [],
    rttMs: values.rtt === undefined ? undefined : Number(values.rtt),
    warmupSeconds,
    oneRateShare,
    mode: values.smoke ? 'smoke' : values.full ? 'full' : 'quick',
  };
}

/** The load client child: one job at a time over IPC. */
class Client {
  private constructor(private readonly child: ChildProcess) {}

  get pid(): number {
    return this.child.pid!;
  }

  static start(): Promise<Client> {
    return new Promise((resolveStart, reject) => {
      const child = fork(join(HERE, 'client.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      child.once('error', reject);
      child.once('exit', (code) => reject(new BenchError(`load client exited early (${code})`)));
      child.once('message', () => {
        child.removeAllListeners('exit');
        resolveStart(new Client(child));
      });
    });
  }

  run<T>(job: ClientJob): Promise<T> {
    return new Promise((resolveJob, reject) => {
      const onExit = (): void => reject(new BenchError('load client died'));
      this.child.once('exit', onExit);
      this.child.once('message', (reply: ClientReply) => {
        this.child.off('exit', onExit);
        if (reply.ok) resolveJob(reply.result as T);
        else reject(new BenchError(`client ${job.op}: ${reply.error}`));
      });
      this.child.send(job);
    });
  }

  stop(): void {
    this.child.disconnect();
  }
}

interface Gateway extends Proc {
  http: number;
  socks5: number;
}

/** The minimal Node gateway (bench/minimal.ts) in front of the same upstreams. */
async function startMinimal(squid: Upstream, socks: Upstream): Promise<Gateway> {
  const spec = {
    user: SOCKS_USER,
    password: BENCH_PASSWORD,
    http: { port: squid.port },
    socks5: { port: socks.port, username: socks.username, password: socks.password },
  };
  const { info, proc } = await startJsonChild<{ http: number; socks5: number; pid: number }>(process.execPath, [
    '--import',
    'tsx',
    join(HERE, 'minimal.ts'),
    JSON.stringify(spec),
  ]);
  return { ...proc, http: info.http, socks5: info.socks5 };
}

/** The real daemon; with --profile its CPU profile is written into the directory on exit. */
async function startRotor(
  squid: Upstream,
  socks: Upstream,
  profileDir: string | undefined,
  nodeFlags: string[],
  build: string | undefined,
): Promise<Gateway> {
  const flags = [...nodeFlags, ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [])];
  const d = await startDaemon(squid, socks, flags, undefined, build);
  return { pid: d.pid, http: d.http, socks5: d.socks5, stop: d.stop };
}

function tool(cmd: string, args: string[]): string {
  try {
    return (
      execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
        .trim()
        .split('\n')[0] ?? ''
    );
  } catch (err) {
    const out = (err as { stdout?: string }).stdout;
    return typeof out === 'string' && out.trim() ? out.trim().split('\n')[0]! : 'unknown';
  }
}

function machine() {
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? cpus()[0]?.model ?? 'unknown';
  return {
    cpus: cpus().length,
    cpuModel: model.trim(),
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    kernel: release(),
  };
}

function versions() {
  return {
    node: process.version,
    microsocks: tool('dpkg-query', ['-W', '-f', '${Version}', 'microsocks']),
    squid: tool('dpkg-query', ['-W', '-f', '${Version}', 'squid']),
    wrk: tool('wrk', ['-v'])
      .replace(/^wrk\s*/, '')
      .replace(/\s+\[.*$/, ''),
  };
}

type Samples = Map<string, { direct: number[]; minimal: number[]; rotor: number[]; errors: number; note?: string }>;

function record(samples: Samples, key: string, path: Path, value: number, errors = 0): void {
  let s = samples.get(key);
  if (!s) {
    s = { direct: [], minimal: [], rotor: [], errors: 0 };
    samples.set(key, s);
  }
  s[path].push(value);
  s.errors += errors;
}

const log = (text: string): void => {
  process.stderr.write(`${text}\n`);
};

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  const s = flags.settings;
  if (flags.rttMs !== undefined) {
    if (!Number.isFinite(flags.rttMs) || flags.rttMs < 0 || flags.rttMs > 1000) throw new BenchError('--rtt takes milliseconds, 0..1000');
    const { runRtt } = await import('./rtt.ts');
    const smoke = flags.mode === 'smoke';
    const table = await runRtt({ rttMs: flags.rttMs, reps: smoke ? 1 : s.reps, count: smoke ? 10 : 40, burstMs: smoke ? 1000 : 4000, log });
    process.stdout.write(`${table}\n`);
    return;
  }
  const started = Date.now();
  log(
    `rotor bench: ${flags.mode}, cases ${flags.cases.join(' ')}, ${s.reps} repetition(s)${flags.profile ? `, profiling into ${flags.profile}` : ''}`,
  );

  if (flags.build === undefined) ensureBuilt(log);
  const procs: Proc[] = [];
  let client: Client | undefined;
  const samples: Samples = new Map();
  const windows: CpuWindow[] = [];
  const idle: { minimal?: number; rotor?: number } = {};
  /** M2 at one rate: the tunnels/s offered to every path, and per path the tunnels started behind their slot */
  const oneRate = { perSecond: 0, late: new Map<Path, number>() };
  try {
    // Processes that do not need each other start together (each start is mostly waiting for a ready line).
    const [target, socks, squid] = await startedTogether(procs, [
      startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]),
      startMicrosocks(UP_USER, UP_PASS),
      startSquid(),
    ] as const);
    const tport = target.info.port;
    const [minimal, rotor] = await startedTogether(procs, [
      startMinimal(squid, socks),
      startRotor(squid, socks, flags.profile, flags.rotorNodeFlags, flags.build),
    ] as const);
    // Idle RSS: both gateways up, no traffic yet (Rotor's includes the embedded sandbox).
    await sleep(s.settleMs);
    idle.minimal = rssBytes(minimal.pid) / 1024 ** 2;
    idle.rotor = rssBytes(rotor.pid) / 1024 ** 2;
    client = await Client.start();
    const c = client;
    const gateways: Record<Exclude<Path, 'direct'>, Gateway> = { minimal, rotor };
    /** Runs `work` and returns the CPU each process spent meanwhile (the gateway on its own path). */
    const metered = async <T>(
      path: Path,
      proto: Proto,
      work: () => Promise<T>,
      withClient = true,
    ): Promise<{ value: T; spent: Partial<Record<Role, number>>; gatewayMain?: number; seconds: number }> => {
      const pids: Partial<Record<Role, number>> = {
        upstream: proto === 'connect' ? squid.pid : socks.pid,
        target: target.proc.pid,
        ...(withClient ? { client: c.pid } : {}),
        ...(path !== 'direct' ? { gateway: gateways[path].pid } : {}),
      };
      const before = Object.fromEntries(Object.entries(pids).map(([r, pid]) => [r, cpuMs(pid)]));
      const mainBefore = pids.gateway === undefined ? NaN : threadCpuMs(pids.gateway).main;
      const t = performance.now();
      const value = await work();
      const seconds = (performance.now() - t) / 1000;
      const spent: Partial<Record<Role, number>> = {};
      for (const [r, pid] of Object.entries(pids)) spent[r as Role] = cpuMs(pid) - before[r]!;
      const gatewayMain = pids.gateway === undefined ? undefined : threadCpuMs(pids.gateway).main - mainBefore;
      return { value, spent, gatewayMain, seconds };
    };

    const proxyFor = (path: Path, proto: Proto, up: { socks: Upstream; squid: Upstream }, g: Gateway | undefined): ProxySpec => {
      if (path === 'direct' || !g) {
        const u = proto === 'connect' ? up.squid : up.socks;
        return { kind: proto, port: u.port, username: u.username || 'none', password: u.password || 'none' };
      }
      return proto === 'connect'
        ? { kind: 'connect', port: g.http, username: path === 'rotor' ? HTTP_USER : SOCKS_USER, password: BENCH_PASSWORD }
        : { kind: 'socks5', port: g.socks5, username: SOCKS_USER, password: BENCH_PASSWORD };
    };
    const proxy = (path: Path, proto: Proto): ProxySpec =>
      proxyFor(path, proto, { socks, squid }, path === 'direct' ? undefined : gateways[path]);
    const wrkJob = (path: Path, seconds: number) => {
      const p = proxy(path, 'connect');
      return {
        proxyPort: p.port,
        targetPort: tport,
        username: p.username,
        password: p.password,
        connections: s.m1Connections,
        durationSeconds: seconds,
      };
    };

    // Warm-up: JIT, connection caches and the kernel's socket buffers on every path; not recorded.
    for (const path of PATHS) {
      for (const proto of ['connect', 'socks5'] as const) {
        await c.run<LatencyResult>({ op: 'latency', proxy: proxy(path, proto), target: tport, count: Math.min(100, s.m4Count) });
        if (flags.cases.includes('M3'))
          await c.run<BulkResult>({ op: 'bulk', proxy: proxy(path, proto), target: tport, bytes: Math.min(s.m3Bytes, 32 * 1024 ** 2) });
      }
      if (flags.cases.includes('M1') && flags.mode !== 'smoke') await runWrk(wrkJob(path, 1));
    }

    const measure: Record<CaseId | 'M2 one rate', (path: Path, rep: number) => Promise<void>> = {
      M1: async (path, rep) => {
        const m = await metered(path, 'connect', () => runWrk(wrkJob(path, s.m1Seconds)), false);
        const r = m.value;
        record(samples, 'M1', path, r.requestsPerSecond, r.errors);
        windows.push({ key: 'M1', path, rep, ops: r.requests, seconds: m.seconds, cpu: m.spent, gatewayMain: m.gatewayMain });
      },
      M2: async (path, rep) => {
        for (const proto of ['connect', 'socks5'] as const) {
          const job: ClientJob = { op: 'rate', proxy: proxy(path, proto), target: tport, concurrency: s.m2Concurrency, durationMs: s.m2Ms };
          const m = await metered(path, proto, () => c.run<RateResult>(job));
          const r = m.value;
          record(samples, `M2 ${proto}`, path, r.perSecond, r.errors);
          windows.push({ key: `M2 ${proto}`, path, rep, ops: r.completed, seconds: m.seconds, cpu: m.spent, gatewayMain: m.gatewayMain });
        }
      },
      // Every path at the same offered rate (bench/client.ts 'paced'): as fast as they go, each gateway runs at its
      // own rate, and CPU per tunnel falls with the rate (more tunnels per wake-up of the event loop), so the
      // slower gateway's is read at a rate that costs more per tunnel. CPU table only.
      'M2 one rate': async (path, rep) => {
        for (const proto of ['connect', 'socks5'] as const) {
          const job: ClientJob = {
            op: 'paced',
            proxy: proxy(path, proto),
            target: tport,
            perSecond: oneRate.perSecond,
            concurrency: s.m2Concurrency,
            durationMs: s.m2Ms,
          };
          const m = await metered(path, proto, () => c.run<RateResult>(job));
          const r = m.value;
          oneRate.late.set(path, (oneRate.late.get(path) ?? 0) + (r.late ?? 0));
          const key = `M2 ${proto} at ${oneRate.perSecond}/s`;
          windows.push({ key, path, rep, ops: r.completed, seconds: m.seconds, cpu: m.spent, gatewayMain: m.gatewayMain });
        }
      },
      M3: async (path, rep) => {
        for (const proto of ['connect', 'socks5'] as const) {
          const job: ClientJob = { op: 'bulk', proxy: proxy(path, proto), target: tport, bytes: s.m3Bytes };
          const m = await metered(path, proto, () => c.run<BulkResult>(job));
          const r = m.value;
          record(samples, `M3 ${proto}`, path, r.mibPerSecond, r.bytes === s.m3Bytes ? 0 : 1);
          const mib = r.bytes / 1024 ** 2;
          windows.push({ key: `M3 ${proto}`, path, rep, ops: mib, seconds: m.seconds, cpu: m.spent, gatewayMain: m.gatewayMain });
        }
      },
      M4: async (path, rep) => {
        for (const proto of ['connect', 'socks5'] as const) {
          const job: ClientJob = { op: 'latency', proxy: proxy(path, proto), target: tport, count: s.m4Count };
          const m = await metered(path, proto, () => c.run<LatencyResult>(job));
          const r = m.value;
          record(samples, `M4 ${proto} p50`, path, r.p50Ms, r.errors);
          windows.push({ key: `M4 ${proto}`, path, rep, ops: r.count, seconds: m.seconds, cpu: m.spent, gatewayMain: m.gatewayMain });
          record(samples, `M4 ${proto} p99`, path, r.p99Ms, 0);
        }
      },
      M5: async (path) => {
        // Fresh processes, so the figure is not flattered by heap left over from the other cases; the smoke
        // run (CI, seconds matter, the figure does not) reuses the running ones.
        const fresh = flags.mode !== 'smoke';
        for (const proto of ['connect', 'socks5'] as const) {
          const up = fresh ? { socks: await startMicrosocks(UP_USER, UP_PASS), squid: await startSquid() } : { socks, squid };
          let g: Gateway | undefined = path === 'direct' || fresh ? undefined : gateways[path];
          try {
            if (fresh && path === 'minimal') g = await startMinimal(up.squid, up.socks);
            if (fresh && path === 'rotor') g = await startRotor(up.squid, up.socks, undefined, flags.rotorNodeFlags, flags.build);
            const p = proxyFor(path, proto, up, g);
            const measured = g ? g.pid : proto === 'connect' ? up.squid.pid : up.socks.pid;
            // A few tunnels first, so code paths are loaded and the heap has its working shape.
            await c.run<HoldResult>({ op: 'hold', proxy: p, target: tport, count: 20, concurrency: 8 });
            await c.run<UseResult>({ op: 'use', concurrency: 8 });
            await sleep(0.3 * s.settleMs);
            const before = rssBytes(measured);
            const held = await c.run<HoldResult>({ op: 'hold', proxy: p, target: tport, count: s.m5Count, concurrency: 32 });
            await sleep(0.5 * s.settleMs);
            const after = rssBytes(measured);
            const used = await c.run<UseResult>({ op: 'use', concurrency: 32 });
            const perTunnelKiB = held.held > 0 ? (after - before) / held.held / 1024 : NaN;
            record(samples, `M5 ${proto}`, path, perTunnelKiB, held.errors + used.failed + (s.m5Count - used.ok - used.failed));
            const entry = samples.get(`M5 ${proto}`)!;
            if (path === 'rotor') entry.note = `${used.ok}/${s.m5Count} usable after`;
          } finally {
            if (fresh) {
              await g?.stop();
              await up.socks.stop();
              await up.squid.stop();
            }
          }
        }
      },
    };

    // The first repetition of a case runs cold: V8 still compiles the hot paths on its other threads (the
    // gateways' other-thread CPU in the first 2 s M1 window 390-400 ms against 50-80 in the later ones, CPU per
    // request 0.48-0.56 ms against 0.30-0.34; M2 likewise) and Rotor's warm set has yet to learn the tunnel rate.
    // So one repetition of the cases the CPU table covers runs first, every path, and is not recorded: the table is
    // steady state, as bench/ab.ts's rounds are after its warm-up. (M3 has its own warm-up above; M5 starts anew.)
    // The optimizing compiler works on a daemon's path for ~10 s of load (bench/jit.ts), so a gateway's warm-up
    // repeats until --warmup seconds (default 10) have passed; the direct path has no JIT of its own to warm.
    const warmUp = flags.mode === 'smoke' ? [] : flags.cases.filter((id) => id === 'M1' || id === 'M2' || id === 'M4');
    for (const id of warmUp) {
      for (const path of PATHS) {
        const t = Date.now();
        do await measure[id](path, -1);
        while (path !== 'direct' && Date.now() - t < flags.warmupSeconds * 1000);
        log(`  warm-up ${id} ${path}: ${((Date.now() - t) / 1000).toFixed(1)} s`);
      }
    }
    // The one rate: a share of the slowest M2 rate any path reached in the warm-up (or, without one, the first repetition).
    const setOneRate = (): void => {
      const rates = windows.filter((w) => w.key.startsWith('M2 ') && w.seconds > 0).map((w) => w.ops / w.seconds);
      if (oneRate.perSecond === 0 && rates.length > 0)
        oneRate.perSecond = Math.max(10, Math.round((flags.oneRateShare * Math.min(...rates)) / 10) * 10);
    };
    if (flags.oneRateShare > 0 && flags.cases.includes('M2')) setOneRate();
    samples.clear();
    windows.length = 0;

    for (let rep = 0; rep < s.reps; rep++) {
      for (const id of flags.cases) {
        // The order rotates each repetition, so no path always runs first (or after the same neighbour).
        const order = PATHS.map((_, i) => PATHS[(i + rep) % PATHS.length]!);
        for (const path of order) {
          const t = Date.now();
          await measure[id](path, rep);
          log(`  rep ${rep + 1}/${s.reps} ${id} ${path}: ${((Date.now() - t) / 1000).toFixed(1)} s`);
        }
        if (id === 'M2' && flags.oneRateShare > 0) {
          setOneRate();
          for (const path of order) {
            const t = Date.now();
            await measure['M2 one rate'](path, rep);
            log(`  rep ${rep + 1}/${s.reps} M2 at ${oneRate.perSecond}/s ${path}: ${((Date.now() - t) / 1000).toFixed(1)} s`);
          }
        }
      }
    }
  } finally {
    client?.stop();
    for (const p of procs.reverse()) await p.stop();
  }

  const rows = buildRows(samples, flags.cases, s);
  const seconds = (Date.now() - started) / 1000;
  // The note is shown on its own line; the command is what reproduces the figures.
  const args = process.argv.slice(2).filter((a, i, all) => a !== '--note' && all[i - 1] !== '--note' && !a.startsWith('--note='));
  const command = `npm run bench${args.length > 0 ? ` -- ${args.join(' ')}` : ''}`;
  const load = loadavg()
    .map((x) => x.toFixed(1))
    .join(' ');
  const context = {
    machine: machine(),
    versions: versions(),
    command,
    seconds,
    date: new Date().toISOString(),
    settings: s,
    warmupSeconds: flags.warmupSeconds,
    oneRate: oneRate.perSecond > 0 ? { perSecond: oneRate.perSecond, late: Object.fromEntries(oneRate.late) } : undefined,
    note: flags.note,
    idle,
    load,
  };
  const cpuTable = cpuRows(windows, PATHS);
  process.stdout.write(
    `\n${textTable(rows)}\n\n${idleLine(idle)}\n${settingsLine(s, flags.warmupSeconds, flags.build)}; ${seconds.toFixed(0)} s; load average at the end ${load}\n`,
  );
  if (cpuTable.length > 0) process.stdout.write(`\n${cpuTitle(context.oneRate)}:\n${textGrid(CPU_HEADERS, cpuTable)}\n`);
  if (flags.cpuDetail && windows.length > 0)
    process.stdout.write(`\nThe gateways' measured windows:\n${textGrid(DETAIL_HEADERS, cpuDetailRows(windows))}\n`);
  if (flags.json) writeFileSync(flags.json, `${JSON.stringify({ ...context, rows, cpu: cpuTable, windows }, null, 2)}\n`);
  if (flags.out) {
    writeDocs(flags.out, rows, cpuTable, context);
    log(`results written to ${flags.out}`);
  }
}

function idleLine(idle: { minimal?: number; rotor?: number }): string {
  return `Idle RSS after start, MiB: rotor ${idle.rotor !== undefined ? fmt(idle.rotor) : '-'} (with the embedded sandbox), minimal ${idle.minimal !== undefined ? fmt(idle.minimal) : '-'} (under tsx)`;
}

/**
 * Awaits processes started at once; each that started joins `procs` (stopped at the end), so one that failed
 * to start does not leave the others running.
 */
async function startedTogether<T extends readonly Promise<Proc | { proc: Proc }>[]>(
  procs: Proc[],
  starts: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(starts);
  for (const r of settled) if (r.status === 'fulfilled') procs.push('proc' in r.value ? r.value.proc : r.value);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

interface Meta {
  name: string;
  unit: string;
  higher: boolean;
  /** issue 14's targets, against direct and against the minimal gateway */
  target?: (r: Row) => boolean;
  targetText: string;
}

const atLeast = (direct: number) => (r: Row) => r.ratio >= direct && r.ratioMinimal >= 1;
const latency = (r: Row) => r.added! <= 0.3 && r.rotor - r.minimal <= 0.1;

const NAMES: Record<string, Meta> = {
  M1: {
    name: 'M1 plain-HTTP forwarding, keep-alive',
    unit: 'req/s',
    higher: true,
    target: atLeast(0.4),
    targetText: '/direct >= 0.4, /minimal >= 1',
  },
  'M2 connect': {
    name: 'M2 new tunnels, CONNECT',
    unit: 'tunnels/s',
    higher: true,
    target: atLeast(0.6),
    targetText: '/direct >= 0.6, /minimal >= 1',
  },
  'M2 socks5': {
    name: 'M2 new tunnels, SOCKS5',
    unit: 'tunnels/s',
    higher: true,
    target: atLeast(0.6),
    targetText: '/direct >= 0.6, /minimal >= 1',
  },
  'M3 connect': {
    name: 'M3 bulk, one CONNECT tunnel',
    unit: 'MiB/s',
    higher: true,
    target: atLeast(0.9),
    targetText: '/direct >= 0.9, /minimal >= 1',
  },
  'M3 socks5': {
    name: 'M3 bulk, one SOCKS5 tunnel',
    unit: 'MiB/s',
    higher: true,
    target: atLeast(0.95),
    targetText: '/direct >= 0.95, /minimal >= 1',
  },
  'M4 connect p50': {
    name: 'M4 fresh tunnel, CONNECT, p50',
    unit: 'ms',
    higher: false,
    target: latency,
    targetText: 'added <= 0.3 ms, <= minimal + 0.1',
  },
  'M4 connect p99': { name: 'M4 fresh tunnel, CONNECT, p99', unit: 'ms', higher: false, targetText: '-' },
  'M4 socks5 p50': {
    name: 'M4 fresh tunnel, SOCKS5, p50',
    unit: 'ms',
    higher: false,
    target: latency,
    targetText: 'added <= 0.3 ms, <= minimal + 0.1',
  },
  'M4 socks5 p99': { name: 'M4 fresh tunnel, SOCKS5, p99', unit: 'ms', higher: false, targetText: '-' },
  'M5 connect': {
    name: 'M5 RSS per idle tunnel, CONNECT (direct = squid itself)',
    unit: 'KiB',
    higher: false,
    target: (r) => r.rotor <= 20,
    targetText: '<= 20 KiB',
  },
  'M5 socks5': {
    name: 'M5 RSS per idle tunnel, SOCKS5 (direct = microsocks itself)',
    unit: 'KiB',
    higher: false,
    target: (r) => r.rotor <= 20,
    targetText: '<= 20 KiB',
  },
};

function buildRows(samples: Samples, cases: CaseId[], _s: Settings): Row[] {
  const rows: Row[] = [];
  for (const [key, meta] of Object.entries(NAMES)) {
    const id = key.slice(0, 2) as CaseId;
    if (!cases.includes(id)) continue;
    const sample = samples.get(key);
    const direct = median(sample?.direct ?? []);
    const minimal = median(sample?.minimal ?? []);
    const rotor = median(sample?.rotor ?? []);
    const row: Row = {
      case: id,
      name: meta.name,
      unit: meta.unit,
      direct,
      minimal,
      rotor,
      ratio: rotor / direct,
      ratioMinimal: rotor / minimal,
      target: meta.targetText,
      met: null,
      errors: sample?.errors ?? 0,
    };
    if (!meta.higher && meta.unit === 'ms') {
      row.added = rotor - direct;
      row.addedMinimal = minimal - direct;
    }
    if (meta.target) row.met = meta.target(row);
    if (sample?.note) row.note = sample.note;
    rows.push(row);
  }
  return rows;
}

function cells(r: Row): string[] {
  const met = r.met === null ? '' : r.met ? 'yes' : 'NO';
  const plus = (x: number): string => `${x >= 0 ? '+' : ''}${fmt(x)}`;
  const extra = [
    r.added !== undefined ? `added: rotor ${plus(r.added)} ms, minimal ${plus(r.addedMinimal!)} ms` : '',
    r.note ?? '',
    r.errors ? `${r.errors} errors` : '',
  ]
    .filter(Boolean)
    .join('; ');
  return [r.name, r.unit, fmt(r.direct), fmt(r.minimal), fmt(r.rotor), fmt(r.ratio), fmt(r.ratioMinimal), r.target, met, extra];
}

const HEADERS = ['case', 'unit', 'direct', 'minimal', 'rotor', 'rotor/direct', 'rotor/minimal', 'target', 'met', 'notes'];
const NUMERIC = [2, 3, 4, 5, 6];

export function textTable(rows: Row[]): string {
  const data = [HEADERS, ...rows.map(cells)];
  const widths = HEADERS.map((_, i) => Math.max(...data.map((d) => d[i]!.length)));
  const line = (d: string[]) =>
    d
      .map((x, i) => (NUMERIC.includes(i) ? x.padStart(widths[i]!) : x.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(HEADERS), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map((r) => line(cells(r)))].join('\n');
}

function markdownTable(rows: Row[]): string {
  return markdownGrid(HEADERS, rows.map(cells), NUMERIC);
}

function markdownGrid(headers: string[], data: string[][], right: number[]): string {
  const line = (d: string[]) => `| ${d.join(' | ')} |`;
  return [line(headers), line(headers.map((_, i) => (right.includes(i) ? '---:' : '---'))), ...data.map(line)].join('\n');
}

function textGrid(headers: string[], data: string[][]): string {
  const all = [headers, ...data];
  const widths = headers.map((_, i) => Math.max(...all.map((d) => d[i]!.length)));
  const line = (d: string[]) =>
    d
      .map((x, i) => (i >= 2 ? x.padStart(widths[i]!) : x.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...data.map(line)].join('\n');
}

/**
 * What the CPU table measures, as its header says: the same as bench/ab.ts, steady state only (start-up and the
 * warm-up are outside every window), the gateway's main thread and its other threads apart.
 */
const CPU_TITLE =
  "CPU per operation, ms: each process's CPU (user + system, all threads) over all repetitions of a case / their operations " +
  '(as bench/ab.ts); measured windows only, start-up and warm-up outside them; the gateway is the minimal gateway or Rotor, ' +
  "main thread + other threads; M1's client is wrk, not measured";

/** The CPU table's title, with what its one-rate M2 rows are. */
function cpuTitle(oneRate: { perSecond: number; late: Record<string, number> } | undefined): string {
  if (oneRate === undefined) return CPU_TITLE;
  const late = Object.entries(oneRate.late)
    .map(([path, n]) => `${path} ${n}`)
    .join(', ');
  return (
    `${CPU_TITLE}. "M2 … at ${oneRate.perSecond}/s": every path offered the same ${oneRate.perSecond} new tunnels/s ` +
    `(a share of the slowest path's M2 rate; tunnels started over 5 ms behind their slot: ${late})`
  );
}

function settingsLine(s: Settings, warmupSeconds: number, build?: string): string {
  return (
    `each gateway warmed ${warmupSeconds} s or more per case; M1 wrk -t1 -c${s.m1Connections} ${s.m1Seconds} s; M2 ${s.m2Concurrency} concurrent for ${s.m2Ms / 1000} s; ` +
    `M3 ${fmt(s.m3Bytes / 1024 ** 2)} MiB; M4 ${s.m4Count} sequential; M5 ${s.m5Count} tunnels; ` +
    `${s.reps} repetition(s), medians; Rotor is \`rotor start\` as \`npm start\` runs it (${describeNpmStart(build)}; embedded sandbox, accounting on SQLite, metrics)`
  );
}

const BEGIN = '<!-- bench:results:begin -->';
const END = '<!-- bench:results:end -->';

function writeDocs(
  file: string,
  rows: Row[],
  cpuRows: string[][],
  ctx: {
    machine: ReturnType<typeof machine>;
    versions: ReturnType<typeof versions>;
    command: string;
    seconds: number;
    date: string;
    settings: Settings;
    warmupSeconds: number;
    note: string | undefined;
    idle: { minimal?: number; rotor?: number };
    load: string;
    oneRate: { perSecond: number; late: Record<string, number> } | undefined;
  },
): void {
  const m = ctx.machine;
  const v = ctx.versions;
  const block = [
    BEGIN,
    `Run of ${ctx.date.slice(0, 16).replace('T', ' ')} UTC, ${ctx.seconds.toFixed(0)} s, with \`${ctx.command}\`.`,
    '',
    `- Machine: ${m.cpus} CPUs (${m.cpuModel}), ${m.memoryGiB} GiB memory, Linux ${m.kernel}; loopback only.`,
    `- Versions: Node ${v.node}, microsocks ${v.microsocks}, squid ${v.squid}, wrk ${v.wrk}.`,
    `- Settings: ${settingsLine(ctx.settings, ctx.warmupSeconds)}.`,
    `- Load average at the end: ${ctx.load}. ${idleLine(ctx.idle)}.`,
    ...(ctx.note ? [`- Note: ${ctx.note}`] : []),
    '',
    markdownTable(rows),
    '',
    `${cpuTitle(ctx.oneRate)}:`,
    '',
    markdownGrid(CPU_HEADERS, cpuRows, CPU_NUMERIC),
    END,
  ].join('\n');
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n\n## Latest run\n\n';
  const a = text.indexOf(BEGIN);
  const b = text.indexOf(END);
  text = a >= 0 && b > a ? `${text.slice(0, a)}${block}${text.slice(b + END.length)}` : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(file, text);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
