// Instructions per new tunnel (M2's load), counted by valgrind's callgrind: a figure the machine's
// load does not move, for changes too small for CPU time to resolve on a shared machine. Each gateway — the
// minimal gateway or a build (`rotor start` as `npm start` runs it) — runs in turn under callgrind behind the same
// squid, microsocks and target; after a warm-up (the JIT settles as it would: its tiers go by call counts, not
// time) the counters are zeroed, a fixed load runs, and the instructions of every thread of the gateway (the
// main thread, the collector's and the compiler's helpers) are divided by the operations completed. The kernel's
// share is not in it (syscalls per operation: bench/ab.ts --strace). Slow: a gateway runs some 30-50 times slower
// under valgrind, so keep the load small.
//
//   node --import tsx bench/instr.ts [--case connect|socks5] [--warmup 20] [--idle 20] [--seconds 20] [--concurrency 4] [--keep DIR] minimal DIR_A [DIR_B ...]
//
// --keep DIR keeps each gateway's loaded-window dump (DIR/N-LABEL.callgrind, for callgrind_annotate) and runs
// node with --perf-basic-prof, keeping its map of JIT code (DIR/N-LABEL.map): JavaScript has no symbols, so
// callgrind names its code by address, which bench/instr-js.ts maps to function names.
//
// A DIR is a build directory as bench/ab.ts takes (bin/, dist/, package.json; ab-config.json merged into its
// config); `.` is this checkout. Needs valgrind (Debian package `valgrind`).
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { stopChild } from '../test/support/upstreams.ts';
import type { ClientJob, ClientReply, RateResult } from './client.ts';
import { benchConfig, npmStartCommand, withBuildConfig } from './daemon.ts';
import { startJsonChild, startMicrosocks, startSquid } from './procs.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
// By URL: with --keep a gateway runs in the work directory, where a bare 'tsx' does not resolve.
const TSX = import.meta.resolve('tsx');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    case: { type: 'string', default: 'connect' },
    warmup: { type: 'string', default: '20' },
    seconds: { type: 'string', default: '20' },
    concurrency: { type: 'string', default: '4' },
    idle: { type: 'string', default: '20' },
    keep: { type: 'string' },
    // Callgrind's cache simulation as well (--cache-sim=yes: first-level and last-level misses, reads and writes
    // apart): per tunnel beside the instructions, to see whether two builds with the same instructions differ in
    // how much memory they touch. Slower still; the simulated caches are the host's as valgrind detects them.
    cache: { type: 'boolean', default: false },
    // The last-level cache callgrind simulates, as valgrind's --LL=size,associativity,line (e.g. 1048576,16,64 for
    // a core's own second-level cache; in a VM valgrind may detect none and simulate 512 MiB, which misses only cold).
    ll: { type: 'string' },
  },
});
const kind = values.case.toLowerCase();
if (kind !== 'connect' && kind !== 'socks5') throw new Error('--case is connect or socks5');
if (positionals.length === 0) throw new Error('usage: bench/instr.ts [--case connect|socks5] minimal DIR_A [DIR_B ...]');
const concurrency = Number(values.concurrency);
const idleSeconds = Number(values.idle);
const keep = values.keep === undefined ? undefined : resolve(values.keep);
if (keep !== undefined) mkdirSync(keep, { recursive: true });
const PERF_FLAGS = keep === undefined ? [] : ['--perf-basic-prof'];

// Instrumentation starts off: the start and the warm-up run under valgrind's translation alone (several times
// faster than with callgrind's counting), so the warm-up is long enough for the JIT's tiers to settle; it is
// switched on (callgrind_control --instr=on) before the windows that are measured.
const VALGRIND = [
  '--tool=callgrind',
  '--smc-check=all-non-file',
  values.cache ? '--cache-sim=yes' : '--cache-sim=no',
  ...(values.cache && values.ll !== undefined ? [`--LL=${values.ll}`] : []),
  '--branch-sim=no',
  '--dump-line=no',
  '--instr-atstart=no',
];

interface Gateway {
  label: string;
  pid: number;
  http: number;
  socks5: number;
  out: string;
  child: ChildProcess;
}

const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
const socks = await startMicrosocks('bench', 'unused');
const squid = await startSquid();
const work = mkdtempSync(join(tmpdir(), 'rotor-instr-'));

/** Starts a gateway under callgrind and waits for the line that gives its ports (slow: minutes for a build). */
async function start(spec: string, n: number): Promise<Gateway> {
  const out = join(work, `${n}.callgrind`);
  let args: string[];
  let env = { ...process.env } as Record<string, string>;
  for (const k of Object.keys(env)) if (k.startsWith('ROTOR_')) delete env[k];
  if (spec === 'minimal') {
    const minimal = {
      user: SOCKS_USER,
      password: BENCH_PASSWORD,
      http: { port: squid.port },
      socks5: { port: socks.port, username: socks.username, password: socks.password },
    };
    args = [process.execPath, ...PERF_FLAGS, '--import', TSX, join(HERE, 'minimal.ts'), JSON.stringify(minimal)];
  } else {
    const root = resolve(spec);
    const dir = mkdtempSync(join(work, 'daemon-'));
    const config = join(dir, 'rotor.yaml');
    writeFileSync(config, stringify(withBuildConfig(root, benchConfig(squid, socks, join(dir, 'rotor.db')))));
    const npm = npmStartCommand(root);
    env = { ...env, ...npm.env, ROTOR_CONFIG: config };
    args = [process.execPath, ...npm.nodeFlags, ...PERF_FLAGS, join(root, 'bin', 'rotor.js'), 'start'];
  }
  // With --keep, node's --perf-basic-prof also writes an isolate-*.log into its working directory: the work dir.
  const child = spawn('valgrind', [...VALGRIND, `--callgrind-out-file=${out}`, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(keep !== undefined ? { cwd: work } : {}),
  });
  let text = '';
  const ports = await new Promise<{ http: number; socks5: number }>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${spec}: not listening within 10 minutes:\n${text.slice(-2000)}`)), 600_000);
    child.once('exit', (code) => fail(new Error(`${spec} exited (${code}):\n${text.slice(-2000)}`)));
    const onData = (c: Buffer): void => {
      text += c.toString();
      if (text.length > 1 << 20) text = text.slice(-65536);
      // The minimal gateway prints {"http","socks5","pid"}; a build logs "rotor is ready" with its listeners.
      for (const line of text.split('\n')) {
        if (spec === 'minimal' && line.startsWith('{"http"')) {
          const info = JSON.parse(line) as { http: number; socks5: number };
          clearTimeout(timer);
          return ok(info);
        }
        if (spec !== 'minimal' && line.includes('rotor is ready')) {
          const rec = JSON.parse(line) as { http: { port: number }; socks5: { port: number } };
          clearTimeout(timer);
          return ok({ http: rec.http.port, socks5: rec.socks5.port });
        }
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => (text += c.toString()));
  });
  child.removeAllListeners('exit');
  // Keep draining its output (a full pipe would stop it), keep nothing.
  child.stdout!.removeAllListeners('data');
  child.stdout!.resume();
  child.stderr!.removeAllListeners('data');
  child.stderr!.resume();
  return { label: spec, pid: child.pid!, ...ports, out, child };
}

/** Operations completed through the gateway in `seconds`, `concurrency` at a time. */
async function load(g: Gateway, seconds: number): Promise<number> {
  const client = fork(join(HERE, 'client.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  await once(client, 'message');
  const proxy =
    kind === 'connect'
      ? { kind: 'connect' as const, port: g.http, username: g.label === 'minimal' ? SOCKS_USER : HTTP_USER, password: BENCH_PASSWORD }
      : { kind: 'socks5' as const, port: g.socks5, username: SOCKS_USER, password: BENCH_PASSWORD };
  const job: ClientJob = { op: 'rate', proxy, target: target.info.port, concurrency, durationMs: seconds * 1000 };
  client.send(job);
  const [m] = (await once(client, 'message')) as [ClientReply];
  client.disconnect();
  if (!m.ok) throw new Error(m.error);
  const r = m.result as RateResult;
  if (r.errors > 0) process.stderr.write(`${g.label}: ${r.errors} tunnels failed\n`);
  return r.completed;
}

/** callgrind_control on the gateway: -z zeroes the counters, -d dumps them to a new file, --instr=on starts counting. */
function control(g: Gateway, flag: '-z' | '-d' | '--instr=on'): void {
  execFileSync('callgrind_control', [flag, String(g.pid)], { stdio: 'ignore', timeout: 120_000 });
}

/** The files of the dump written by the last `-d` (the highest-numbered ones beside `out`; one per thread). */
function lastDump(g: Gateway): string[] {
  const base = g.out.slice(g.out.lastIndexOf('/') + 1);
  const files = readdirSync(work).filter((f) => f.startsWith(`${base}.`) && /\.\d+(-\d+)?$/.test(f));
  const last = files.map((f) => Number(/\.(\d+)(?:-\d+)?$/.exec(f)![1])).reduce((a, b) => Math.max(a, b), 0);
  return files.filter((f) => Number(/\.(\d+)(?:-\d+)?$/.exec(f)![1]) === last);
}

/**
 * The instructions in the dump written by the last `-d`, and of them the optimizing compilers' own (functions
 * in V8's `compiler::` or `maglev::` namespaces, self cost). Under callgrind a warm-up of some hundreds of
 * operations leaves TurboFan still compiling in the measured window, a share that depends on when each function
 * tiers up, not on the code's steady cost; the table gives the figure with and without it.
 */
function dumped(g: Gateway): { ir: number; compiler: number; events: Map<string, number> } {
  let ir = 0;
  let compiler = 0;
  const events = new Map<string, number>();
  for (const f of lastDump(g)) {
    const text = readFileSync(join(work, f), 'utf8');
    const m = /^(?:summary|totals): (\d+)/m.exec(text);
    if (m) ir += Number(m[1]);
    compiler += compilerSelfCost(text);
    // Every event of the dump (with --cache the simulated misses), by the names of its `events:` line.
    const names = /^events: (.*)$/m.exec(text)?.[1]?.trim().split(/\s+/) ?? [];
    const sums = /^(?:summary|totals): (.*)$/m.exec(text)?.[1]?.trim().split(/\s+/) ?? [];
    names.forEach((name, i) => events.set(name, (events.get(name) ?? 0) + Number(sums[i] ?? 0)));
  }
  return { ir, compiler, events };
}

const COMPILER = /v8::internal::(?:compiler|maglev)::/;

/** Self cost of the compiler's functions in a callgrind dump (names compressed as `(id) name`, then `(id)`). */
function compilerSelfCost(text: string): number {
  const names = new Map<string, string>();
  const nameOf = (spec: string): string => {
    const m = /^\((\d+)\)\s*(.*)$/.exec(spec);
    if (!m) return spec;
    if (m[2]) names.set(m[1]!, m[2]);
    return names.get(m[1]!) ?? '';
  };
  let inCompiler = false;
  let callLine = false;
  let cost = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('fn=')) inCompiler = COMPILER.test(nameOf(line.slice(3)));
    else if (line.startsWith('cfn=')) nameOf(line.slice(4));
    else if (line.startsWith('calls=')) callLine = true;
    else if (/^[0-9+*-]/.test(line)) {
      // The line after calls= is the call's inclusive cost, counted where it was spent.
      if (!callLine && inCompiler) cost += Number(line.split(' ')[1] ?? 0);
      callLine = false;
    }
  }
  return cost;
}

const rows: Array<{ label: string; ops: number; perOp: number; noCompiler: number; idleShare: number; events: Map<string, number> }> = [];
try {
  for (const [n, spec] of positionals.entries()) {
    process.stderr.write(`${spec}: starting under callgrind\n`);
    const g = await start(spec, n);
    try {
      const warm = await load(g, Number(values.warmup));
      process.stderr.write(`${spec}: ${warm} operations of warm-up\n`);
      control(g, '--instr=on');
      // What the gateway runs with no load (its timers: health checks, flushes, pollers) per second, taken
      // off the loaded window: under callgrind a tunnel takes some 50 times longer, so a timer's work would
      // otherwise count 50 times over per tunnel.
      control(g, '-z');
      let t = performance.now();
      await sleep(idleSeconds * 1000);
      control(g, '-d');
      const idle = dumped(g);
      const idleMs = performance.now() - t;
      const idlePerMs = idle.ir / idleMs;
      control(g, '-z');
      t = performance.now();
      const ops = await load(g, Number(values.seconds));
      control(g, '-d');
      const busyMs = performance.now() - t;
      const busy = dumped(g);
      const ir = busy.ir - idlePerMs * busyMs;
      const noCompiler = busy.ir - busy.compiler - ((idle.ir - idle.compiler) / idleMs) * busyMs;
      const events = new Map<string, number>();
      for (const [name, v] of busy.events) events.set(name, (v - ((idle.events.get(name) ?? 0) / idleMs) * busyMs) / Math.max(1, ops));
      if (keep !== undefined) {
        const name = `${n}-${spec.replace(/[^A-Za-z0-9._-]+/g, '_')}`;
        for (const f of lastDump(g)) copyFileSync(join(work, f), join(keep, `${name}.callgrind${f.slice(f.lastIndexOf('.'))}`));
        const map = `/tmp/perf-${g.pid}.map`;
        if (existsSync(map)) copyFileSync(map, join(keep, `${name}.map`));
        writeFileSync(join(keep, `${name}.ops`), `${ops}\n`);
      }
      rows.push({
        label: spec,
        ops,
        perOp: ir / Math.max(1, ops),
        noCompiler: noCompiler / Math.max(1, ops),
        idleShare: (idlePerMs * busyMs) / Math.max(1, ir + idlePerMs * busyMs),
        events,
      });
      process.stderr.write(
        `${spec}: ${ops} operations, ${(ir / 1e6).toFixed(1)} M instructions after ${((idlePerMs * busyMs) / 1e6).toFixed(1)} M of idle work; the compiler's ${(busy.compiler / 1e6).toFixed(1)} M\n`,
      );
    } finally {
      await stopChild(g.child, 30_000);
      if (keep !== undefined) rmSync(`/tmp/perf-${g.pid}.map`, { force: true });
    }
  }
} finally {
  await Promise.all([target.proc.stop(), socks.stop(), squid.stop()]);
  rmSync(work, { recursive: true, force: true });
}

const per = 'tunnel';
// The idle work is not steady (a warm set draining, a flush, a check falling in one window and not the other):
// where it is a large share of the window the figure is unreliable, and the table says how large it was.
process.stdout.write(`\nInstructions per ${per} (callgrind, all threads, user space), --case ${kind}:\n`);
const first = rows[0]!;
process.stdout.write(`  ${''.padEnd(28)} ${'all'.padStart(11)} ${''.padStart(7)}  ${'no compiler'.padStart(11)}\n`);
for (const r of rows) {
  process.stdout.write(
    `  ${r.label.padEnd(28)} ${(r.perOp / 1000).toFixed(1).padStart(9)} k  ${(r.perOp / first.perOp).toFixed(3)}×  ${(r.noCompiler / 1000).toFixed(1).padStart(9)} k  ${(r.noCompiler / first.noCompiler).toFixed(3)}×  (${r.ops} ${per}s; idle work taken off: ${(r.idleShare * 100).toFixed(0)} % of the window)\n`,
  );
}
if (values.cache) {
  // Per operation, idle work taken off as above; the compiler's share is in these (a dump gives no split per event).
  const names = [...first.events.keys()];
  process.stdout.write(`\nEvents per ${per} (callgrind --cache-sim=yes, all threads): ${names.join(' ')}\n`);
  for (const r of rows)
    process.stdout.write(
      `  ${r.label.padEnd(28)} ${names.map((n) => ((r.events.get(n) ?? 0) / 1000).toFixed(2).padStart(9) + ' k').join(' ')}\n`,
    );
}
