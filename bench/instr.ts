// Instructions per new tunnel (M2's load), counted by valgrind's callgrind: a figure the machine's
// load does not move, for changes too small for CPU time to resolve on a shared machine. Each gateway — the
// minimal gateway or a build (`rotor start` as `npm start` runs it) — runs in turn under callgrind behind the same
// squid, microsocks and target; after a warm-up (the JIT settles as it would: its tiers go by call counts, not
// time) the counters are zeroed, a fixed load runs, and the instructions of every thread of the gateway (the
// main thread, the collector's and the compiler's helpers) are divided by the operations completed. The kernel's
// share is not in it (syscalls per operation: bench/ab.ts --strace). Slow: a gateway runs some 30-50 times slower
// under valgrind, so keep the load small.
//
//   node --import tsx bench/instr.ts [--case connect|socks5] [--warmup 20] [--idle 20] [--seconds 20] [--concurrency 4] minimal DIR_A [DIR_B ...]
//
// A DIR is a build directory as bench/ab.ts takes (bin/, dist/, package.json; ab-config.json merged into its
// config); `.` is this checkout. Needs valgrind (Debian package `valgrind`).
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    case: { type: 'string', default: 'connect' },
    warmup: { type: 'string', default: '20' },
    seconds: { type: 'string', default: '20' },
    concurrency: { type: 'string', default: '4' },
    idle: { type: 'string', default: '20' },
  },
});
const kind = values.case.toLowerCase();
if (kind !== 'connect' && kind !== 'socks5') throw new Error('--case is connect or socks5');
if (positionals.length === 0) throw new Error('usage: bench/instr.ts [--case connect|socks5] minimal DIR_A [DIR_B ...]');
const concurrency = Number(values.concurrency);
const idleSeconds = Number(values.idle);

const VALGRIND = ['--tool=callgrind', '--smc-check=all-non-file', '--cache-sim=no', '--branch-sim=no', '--dump-line=no'];

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
    args = [process.execPath, '--import', 'tsx', join(HERE, 'minimal.ts'), JSON.stringify(minimal)];
  } else {
    const root = resolve(spec);
    const dir = mkdtempSync(join(work, 'daemon-'));
    const config = join(dir, 'rotor.yaml');
    writeFileSync(config, stringify(withBuildConfig(root, benchConfig(squid, socks, join(dir, 'rotor.db')))));
    const npm = npmStartCommand(root);
    env = { ...env, ...npm.env, ROTOR_CONFIG: config };
    args = [process.execPath, ...npm.nodeFlags, join(root, 'bin', 'rotor.js'), 'start'];
  }
  const child = spawn('valgrind', [...VALGRIND, `--callgrind-out-file=${out}`, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
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

/** callgrind_control on the gateway: -z zeroes the counters, -d dumps them to a new file. */
function control(g: Gateway, flag: '-z' | '-d'): void {
  execFileSync('callgrind_control', [flag, String(g.pid)], { stdio: 'ignore', timeout: 120_000 });
}

/** The instructions in the dump written by the last `-d` (the highest-numbered file beside `out`). */
function dumped(g: Gateway): number {
  const base = g.out.slice(g.out.lastIndexOf('/') + 1);
  const files = readdirSync(work).filter((f) => f.startsWith(`${base}.`) && /\.\d+(-\d+)?$/.test(f));
  let total = 0;
  const last = files.map((f) => Number(/\.(\d+)(?:-\d+)?$/.exec(f)![1])).reduce((a, b) => Math.max(a, b), 0);
  for (const f of files.filter((f) => Number(/\.(\d+)(?:-\d+)?$/.exec(f)![1]) === last)) {
    const m = /^(?:summary|totals): (\d+)/m.exec(readFileSync(join(work, f), 'utf8'));
    if (m) total += Number(m[1]);
  }
  return total;
}

const rows: Array<{ label: string; ops: number; perOp: number; idleShare: number }> = [];
try {
  for (const [n, spec] of positionals.entries()) {
    process.stderr.write(`${spec}: starting under callgrind\n`);
    const g = await start(spec, n);
    try {
      await load(g, Number(values.warmup));
      // What the gateway runs with no load (its timers: health checks, flushes, pollers) per second, taken
      // off the loaded window: under callgrind a tunnel takes some 50 times longer, so a timer's work would
      // otherwise count 50 times over per tunnel.
      control(g, '-z');
      let t = performance.now();
      await sleep(idleSeconds * 1000);
      control(g, '-d');
      const idlePerMs = dumped(g) / (performance.now() - t);
      control(g, '-z');
      t = performance.now();
      const ops = await load(g, Number(values.seconds));
      control(g, '-d');
      const busyMs = performance.now() - t;
      const ir = dumped(g) - idlePerMs * busyMs;
      rows.push({ label: spec, ops, perOp: ir / Math.max(1, ops), idleShare: (idlePerMs * busyMs) / Math.max(1, ir + idlePerMs * busyMs) });
      process.stderr.write(
        `${spec}: ${ops} operations, ${(ir / 1e6).toFixed(1)} M instructions after ${((idlePerMs * busyMs) / 1e6).toFixed(1)} M of idle work\n`,
      );
    } finally {
      await stopChild(g.child, 30_000);
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
const first = rows[0]!.perOp;
for (const r of rows) {
  process.stdout.write(
    `  ${r.label.padEnd(28)} ${(r.perOp / 1000).toFixed(1).padStart(9)} k  ${(r.perOp / first).toFixed(3)}×  (${r.ops} ${per}s; idle work taken off: ${(r.idleShare * 100).toFixed(0)} % of the window)\n`,
  );
}
