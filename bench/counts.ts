// Counts per plain-HTTP request (M1's load) or per new tunnel (--case connect|socks5: M2's load) that the
// machine's load does not move: the async resources a gateway creates (promises, timers, immediates, sockets),
// the listeners added to and removed from its sockets by event, and process.nextTick calls. Each gateway — a
// build (`rotor start` as `npm start` runs it) or the minimal gateway — runs in turn behind the same squid,
// microsocks and target with bench/counts-preload.mjs; after a warm-up second, the counts over the measured
// part are divided by the operations the client completed. Each of them is work in node's C++ or in its
// megamorphic stream code.
//
//   node --import tsx bench/counts.ts [--case M1|connect|socks5] [--seconds 3] [--top 30] [--promise-sites] [--sides]
//     [--trace pause|resume|read] minimal DIR_A [DIR_B ...]
//
// --promise-sites: each promise also counted by the two frames that made it, outside node's own modules.
// Always counted by side (client: a socket a server accepted, counted from its 'connection'; upstream: any other):
// pause, resume, read (`(0)`: read(0), node's own "read more"), and node's Socket._read (`starts reading` when it
// reaches the handle: readStart or a wait for 'connect'; else a no-op). --sides: listeners by side too. --trace
// NAME: each pause, resume or read call also counted by the two frames outside node's modules that made it.
//
// A DIR is a build directory as bench/ab.ts takes (bin/, dist/, package.json); `.` is this checkout. `minimal@N`
// or `DIR@N`: that gateway with --max-semi-space-size=N.
//
// --profile DIR: instead of counting, a differential CPU profile. Each gateway runs with bench/profile-preload.mjs,
// which profiles the measured part only (V8's sampler every 100 µs); each function's self time is scaled so that
// the profile's busy time equals the main thread's CPU from /proc in the same window, and divided by the
// operations. Printed: µs per operation by file and by function, sorted by how much more the later gateways
// spend than the first (name `minimal` first to read what a build adds). The profiles stay in DIR.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchConfig, npmStartCommand, parseGatewaySpec, spawnRotor, withSemiSpace } from './daemon.ts';
import { startJsonChild, startMicrosocks, startSquid, threadCpuMs, type Proc } from './procs.ts';
import { summarise, type Profile } from './profile.ts';
import { runLoad } from './rate-tunnels.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const PRELOAD = process.env.ROTOR_COUNTS_PRELOAD ?? join(HERE, 'counts-preload.mjs');
const PROFILE_PRELOAD = process.env.S9_PRELOAD ?? join(HERE, 'profile-preload.mjs');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seconds: { type: 'string', default: '3' },
    case: { type: 'string', default: 'M1' },
    top: { type: 'string', default: '30' },
    profile: { type: 'string' },
    // Each promise also counted by where it was made (rows `promise at FRAME <- FRAME`): which call sites make
    // a gateway's promises per operation. A stack per promise slows the gateway: for the counts, not its CPU.
    'promise-sites': { type: 'boolean', default: false },
    // Listeners also counted by side (a socket a server accepted: client; any other: upstream).
    sides: { type: 'boolean', default: false },
    // pause|resume|read: each such call also counted by the two frames outside node's modules that made it.
    trace: { type: 'string' },
  },
});
// The preload reads it (the minimal gateway inherits this environment, a build gets it with npm start's).
if (values['promise-sites']) process.env.ROTOR_COUNTS_SITES = '1';
if (values.sides) process.env.ROTOR_COUNTS_SIDES = '1';
if (values.trace !== undefined) process.env.ROTOR_COUNTS_TRACE = values.trace;
const kind = values.case.toLowerCase();
if (kind !== 'm1' && kind !== 'connect' && kind !== 'socks5') throw new Error('--case is M1, connect or socks5');
if (positionals.length === 0) throw new Error('usage: bench/counts.ts [--case M1|connect|socks5] minimal DIR_A [DIR_B ...]');
const per = kind === 'm1' ? 'request' : 'tunnel';

type Counts = Record<string, number>;
const profileDir = values.profile === undefined ? undefined : resolve(values.profile);
if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true });

const cpu = threadCpuMs;

/** µs per operation by function and by file of a profile of the measured part, scaled to the main thread's CPU. */
function perOperation(file: string, mainMs: number, ops: number): { byFunction: Counts; byFile: Counts } {
  const s = summarise(JSON.parse(readFileSync(file, 'utf8')) as Profile);
  const idle = [...s.byFunction.entries()].filter(([k]) => k.startsWith('(idle)')).reduce((a, [, v]) => a + v, 0);
  const scale = (mainMs * 1000) / Math.max(1, s.total - idle) / ops;
  const out = (m: Map<string, number>): Counts => {
    const c: Counts = {};
    for (const [k, us] of m) if (!k.startsWith('(idle)')) c[k] = us * scale;
    return c;
  };
  return { byFunction: out(s.byFunction), byFile: out(s.byFile) };
}

/** The preload's counts a little after now (it writes every 100 ms). */
async function readCounts(file: string): Promise<Counts> {
  await sleep(300);
  if (!existsSync(file)) return {};
  for (;;) {
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as Counts;
    } catch {
      // read while the preload was writing it
      await sleep(20);
    }
  }
}

const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
const socks = await startMicrosocks('bench', 'unused');
const squid = await startSquid();
const dir = mkdtempSync(join(tmpdir(), 'rotor-counts-'));

/** One gateway measured: counts per operation over the measured part. */
async function measure(spec: string, n: number): Promise<{ label: string; ops: number; per: Counts; byFile?: Counts; cpu?: number }> {
  const { which, semiSpace } = parseGatewaySpec(spec);
  const file = join(dir, `${n}.json`);
  const profileFile = profileDir === undefined ? undefined : join(profileDir, `${n}-${which.replace(/[^\w.-]/g, '_')}-${kind}.cpuprofile`);
  const preload = profileFile === undefined ? PRELOAD : PROFILE_PRELOAD;
  let gateway: Proc & { http: number; socks5: number };
  let user: string;
  if (which === 'minimal') {
    const spec = {
      user: SOCKS_USER,
      password: BENCH_PASSWORD,
      http: { port: squid.port },
      socks5: { port: socks.port, username: socks.username, password: socks.password },
    };
    process.env.ROTOR_COUNTS_FILE = file;
    if (profileFile !== undefined) process.env.ROTOR_PROFILE_FILE = profileFile;
    const { info, proc } = await startJsonChild<{ http: number; socks5: number; pid: number }>(process.execPath, [
      ...withSemiSpace([], semiSpace),
      // e.g. ROTOR_MINIMAL_FLAGS='--log-ic --logfile=/tmp/minimal.log' to run it as a build's flags run that build
      ...(process.env.ROTOR_MINIMAL_FLAGS ?? '').split(' ').filter(Boolean),
      '--import',
      preload,
      '--import',
      'tsx',
      join(HERE, 'minimal.ts'),
      JSON.stringify(spec),
    ]);
    delete process.env.ROTOR_COUNTS_FILE;
    delete process.env.ROTOR_PROFILE_FILE;
    gateway = { ...proc, http: info.http, socks5: info.socks5 };
    user = SOCKS_USER;
  } else {
    const root = resolve(which);
    const start = npmStartCommand(root);
    gateway = await spawnRotor(
      (d) => benchConfig(squid, socks, join(d, 'rotor.db')),
      [...withSemiSpace(start.nodeFlags, semiSpace), '--import', preload],
      60_000,
      {
        ...start.env,
        ROTOR_COUNTS_FILE: file,
        ...(values['promise-sites'] ? { ROTOR_COUNTS_SITES: '1' } : {}),
        ...(values.sides ? { ROTOR_COUNTS_SIDES: '1' } : {}),
        ...(values.trace === undefined ? {} : { ROTOR_COUNTS_TRACE: values.trace }),
        ...(profileFile === undefined ? {} : { ROTOR_PROFILE_FILE: profileFile }),
      },
      { root },
    );
    user = HTTP_USER;
  }
  try {
    const run = (seconds: number): Promise<number> => runLoad({ kind, gateway, user, targetPort: target.info.port, seconds });
    await run(1);
    if (profileFile !== undefined) {
      process.kill(gateway.pid, 'SIGUSR2');
      await sleep(200);
      const a = cpu(gateway.pid);
      const ops = await run(Number(values.seconds));
      const b = cpu(gateway.pid);
      process.kill(gateway.pid, 'SIGUSR2');
      while (!existsSync(`${profileFile}.done`)) await sleep(100);
      const p = perOperation(profileFile, b.main - a.main, ops);
      return { label: spec, ops, per: p.byFunction, byFile: p.byFile, cpu: (b.main + b.other - a.main - a.other) / ops };
    }
    const before = await readCounts(file);
    const ops = await run(Number(values.seconds));
    const after = await readCounts(file);
    const perOp: Counts = {};
    for (const [k, v] of Object.entries(after)) {
      const d = v - (before[k] ?? 0);
      if (d > 0) perOp[k] = d / ops;
    }
    return { label: spec, ops, per: perOp };
  } finally {
    await gateway.stop();
  }
}

/** The profiles' µs per operation, rows sorted by how much more than the first gateway a later one spends. */
function printProfiles(results: Array<{ label: string; ops: number; per: Counts; byFile?: Counts; cpu?: number }>): void {
  const width = 12;
  const line = (name: string, cells: number[], digits = 2): void => {
    process.stdout.write(`${cells.map((c) => c.toFixed(digits).padStart(width)).join('')}  ${name}\n`);
  };
  process.stdout.write(`µs per ${per} (${kind}), measured part of ${values.seconds} s, profiles in ${profileDir}\n`);
  process.stdout.write(`${results.map((r) => r.label.slice(-width + 1).padStart(width)).join('')}\n`);
  line(
    'operations',
    results.map((r) => r.ops),
    0,
  );
  line(
    'CPU ms per operation, all threads (/proc)',
    results.map((r) => r.cpu ?? 0),
    3,
  );
  const table = (title: string, pick: (r: (typeof results)[number]) => Counts, n: number): void => {
    process.stdout.write(`-- ${title}\n`);
    const keys = new Set(results.flatMap((r) => Object.keys(pick(r))));
    const extra = (k: string): number => Math.max(...results.slice(1).map((r) => (pick(r)[k] ?? 0) - (pick(results[0]!)[k] ?? 0)));
    const rows = [...keys].sort((a, b) => Math.abs(extra(b)) - Math.abs(extra(a)));
    for (const k of rows.slice(0, n))
      line(
        k,
        results.map((r) => pick(r)[k] ?? 0),
      );
  };
  table('by file (main thread, µs per operation)', (r) => r.byFile ?? {}, 25);
  table('by function (main thread, µs per operation)', (r) => r.per, Number(values.top));
}

try {
  const results: { label: string; ops: number; per: Counts; byFile?: Counts; cpu?: number }[] = [];
  for (const [i, which] of positionals.entries()) results.push(await measure(which, i));
  if (profileDir !== undefined) {
    printProfiles(results);
    process.exitCode = 0;
  } else {
    const keys = new Set(results.flatMap((r) => Object.keys(r.per)));
    const total = (r: (typeof results)[number], prefix: string): number =>
      Object.entries(r.per)
        .filter(([k]) => k.startsWith(prefix))
        .reduce((a, [, v]) => a + v, 0);
    const width = 12;
    const line = (name: string, cells: number[]): void => {
      process.stdout.write(`${name.padEnd(34)}${cells.map((c) => c.toFixed(2).padStart(width)).join('')}\n`);
    };
    process.stdout.write(`per ${per} (${kind}), measured part of ${values.seconds} s\n`);
    process.stdout.write(`${''.padEnd(34)}${results.map((r) => r.label.slice(-width + 1).padStart(width)).join('')}\n`);
    line(
      'operations',
      results.map((r) => r.ops),
    );
    line(
      'async resources, all',
      results.map((r) => total(r, 'async ')),
    );
    line(
      'listeners added to sockets',
      results.map((r) => total(r, 'listener+ ')),
    );
    line(
      'listeners removed from sockets',
      results.map((r) => total(r, 'listener- ')),
    );
    const rows = [...keys].sort((a, b) => Math.max(...results.map((r) => r.per[b] ?? 0)) - Math.max(...results.map((r) => r.per[a] ?? 0)));
    for (const k of rows.slice(0, Number(values.top)))
      line(
        k,
        results.map((r) => r.per[k] ?? 0),
      );
  }
} finally {
  await squid.stop();
  await socks.stop();
  await target.proc.stop();
  rmSync(dir, { recursive: true, force: true });
}
