// What survives V8's scavenges per plain-HTTP request (M1's load) or per new tunnel (--case connect|socks5: M2's
// load). A scavenge costs in proportion to what it keeps (copied within the young generation, or promoted to the
// old one), not to what was allocated; what it promotes a mark-compact later collects. Each gateway — a build
// (`rotor start` as `npm start` runs it) or the minimal gateway — runs in turn behind the same squid, microsocks
// and target with bench/survivors-preload.mjs; after a warm-up second, the collections over the measured part are
// divided by the operations the client completed: scavenges and mark-compacts per 1,000 operations, bytes copied
// and promoted per operation, the main thread's GC pause, and CPU of the main thread and of the other threads
// (the scavenger's helpers) from /proc. Counts and bytes barely move with the machine's load; CPU does.
//
//   node --import tsx bench/survivors.ts [--case M1|connect|socks5] [--seconds 3] [--lull S] minimal[@SEMI] DIR[@SEMI] ...
//
// --lull S: after the measured load, the gateway idles S seconds and its memory is read every 5 s: RSS from /proc
// and the young generation's committed size (both semi-spaces, from the preload), from ready to the lull's end.
// What a gateway whose young generation grew under load gives back when idle, and when (V8 shrinks it at a
// scavenge while allocation is slow, or at the memory reducer's collection).
//
// A DIR is a build directory as bench/ab.ts takes (bin/, dist/, package.json, an optional ab-config.json merged
// into its config); `.` is this checkout. `@SEMI` runs
// that gateway with --max-semi-space-size=SEMI (MiB) instead of its own (npm start's for a build, node's default
// for the minimal gateway): `minimal@4` is the minimal gateway with Rotor's young generation.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchConfig, npmStartCommand, parseGatewaySpec, spawnRotor, withBuildConfig, withSemiSpace } from './daemon.ts';
import { rssBytes, startJsonChild, startMicrosocks, startSquid, threadCpuMs, type Proc } from './procs.ts';
import { runLoad } from './rate-tunnels.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const PRELOAD = join(HERE, 'survivors-preload.mjs');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seconds: { type: 'string', default: '3' },
    case: { type: 'string', default: 'M1' },
    lull: { type: 'string', default: '0' },
  },
});
const kind = values.case.toLowerCase();
if (kind !== 'm1' && kind !== 'connect' && kind !== 'socks5') throw new Error('--case is M1, connect or socks5');
if (positionals.length === 0) throw new Error('usage: bench/survivors.ts [--case M1|connect|socks5] minimal[@SEMI] DIR[@SEMI] ...');
const per = kind === 'm1' ? 'request' : 'tunnel';
const lullSeconds = Number(values.lull);
if (!(lullSeconds >= 0)) throw new Error('--lull takes seconds, e.g. --lull 60');
const MiB = 1024 * 1024;

interface Totals {
  scavenges: number;
  scavengeMs: number;
  copied: number;
  promoted: number;
  young: number;
  markCompacts: number;
  markCompactMs: number;
  otherGcs: number;
  otherMs: number;
  /** The young generation's committed bytes (new_space's size, both semi-spaces) at the preload's last write. */
  newSpace: number;
}
const ZERO: Totals = {
  scavenges: 0,
  scavengeMs: 0,
  copied: 0,
  promoted: 0,
  young: 0,
  markCompacts: 0,
  markCompactMs: 0,
  otherGcs: 0,
  otherMs: 0,
  newSpace: 0,
};

/** The preload's totals a little after now (it writes every 100 ms). */
async function readTotals(file: string): Promise<Totals> {
  await sleep(300);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Totals) : ZERO;
}

const cpu = threadCpuMs;

const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
const socks = await startMicrosocks('bench', 'unused');
const squid = await startSquid();
const dir = mkdtempSync(join(tmpdir(), 'rotor-survivors-'));

interface Result {
  label: string;
  ops: number;
  d: Totals;
  main: number;
  other: number;
  /** --lull: [seconds since the load ended (-1: at ready), RSS MiB, young generation MiB]. */
  memory: Array<[number, number, number]>;
}

/** One gateway measured: its collections over the measured part. */
async function measure(spec: string, n: number): Promise<Result> {
  const file = join(dir, `${n}.json`);
  const { which, semiSpace } = parseGatewaySpec(spec);
  let gateway: Proc & { http: number; socks5: number };
  let user: string;
  if (which === 'minimal') {
    const mspec = {
      user: SOCKS_USER,
      password: BENCH_PASSWORD,
      http: { port: squid.port },
      socks5: { port: socks.port, username: socks.username, password: socks.password },
    };
    process.env.ROTOR_SURVIVORS_FILE = file;
    const { info, proc } = await startJsonChild<{ http: number; socks5: number; pid: number }>(process.execPath, [
      ...withSemiSpace([], semiSpace),
      '--import',
      PRELOAD,
      '--import',
      'tsx',
      join(HERE, 'minimal.ts'),
      JSON.stringify(mspec),
    ]);
    delete process.env.ROTOR_SURVIVORS_FILE;
    gateway = { ...proc, http: info.http, socks5: info.socks5 };
    user = SOCKS_USER;
  } else {
    const root = resolve(which);
    const start = npmStartCommand(root);
    const flags = withSemiSpace(start.nodeFlags, semiSpace);
    gateway = await spawnRotor(
      (d) => withBuildConfig(root, benchConfig(squid, socks, join(d, 'rotor.db'))),
      [...flags, '--import', PRELOAD],
      60_000,
      { ...start.env, ROTOR_SURVIVORS_FILE: file },
      { root },
    );
    user = HTTP_USER;
  }
  try {
    const memory: Array<[number, number, number]> = [];
    const sample = async (at: number): Promise<void> => {
      const rss = rssBytes(gateway.pid) / MiB;
      memory.push([at, rss, (await readTotals(file)).newSpace / MiB]);
    };
    if (lullSeconds > 0) await sample(-1);
    const run = (seconds: number): Promise<number> => runLoad({ kind, gateway, user, targetPort: target.info.port, seconds });
    await run(1);
    const before = await readTotals(file);
    const cpu0 = cpu(gateway.pid);
    const ops = await run(Number(values.seconds));
    const cpu1 = cpu(gateway.pid);
    const after = await readTotals(file);
    const d = Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - before[k as keyof Totals]])) as unknown as Totals;
    if (lullSeconds > 0) {
      const ended = performance.now();
      await sample(0);
      for (let t = 5; t <= lullSeconds; t += 5) {
        await sleep(Math.max(0, ended + t * 1000 - 300 - performance.now()));
        await sample(t);
      }
    }
    return { label: spec, ops, d, main: cpu1.main - cpu0.main, other: cpu1.other - cpu0.other, memory };
  } finally {
    await gateway.stop();
  }
}

try {
  const results: Result[] = [];
  for (const [i, spec] of positionals.entries()) results.push(await measure(spec, i));
  const width = 13;
  const line = (name: string, cells: (r: Result) => number, digits = 2): void => {
    process.stdout.write(`${name.padEnd(38)}${results.map((r) => cells(r).toFixed(digits).padStart(width)).join('')}\n`);
  };
  process.stdout.write(`per ${per} (${kind}), measured part of ${values.seconds} s\n`);
  process.stdout.write(`${''.padEnd(38)}${results.map((r) => r.label.slice(-width + 1).padStart(width)).join('')}\n`);
  line('operations', (r) => r.ops, 0);
  line('scavenges per 1,000', (r) => (r.d.scavenges / r.ops) * 1000);
  line('bytes copied (young) per op', (r) => r.d.copied / r.ops, 0);
  line('bytes promoted per op', (r) => r.d.promoted / r.ops, 0);
  line('survived (copied + promoted) per op', (r) => (r.d.copied + r.d.promoted) / r.ops, 0);
  line('survival rate of the young gen, %', (r) => ((r.d.copied + r.d.promoted) / Math.max(1, r.d.young)) * 100, 1);
  line('mark-compacts per 1,000', (r) => (r.d.markCompacts / r.ops) * 1000);
  line('GC pause per op, ms (scavenges)', (r) => r.d.scavengeMs / r.ops, 4);
  line('GC pause per op, ms (mark-compacts)', (r) => r.d.markCompactMs / r.ops, 4);
  line('GC pause per op, ms (other phases)', (r) => r.d.otherMs / r.ops, 4);
  line('CPU per op, ms: main thread', (r) => r.main / r.ops, 4);
  line('CPU per op, ms: other threads', (r) => r.other / r.ops, 4);
  if (lullSeconds > 0) {
    process.stdout.write(`memory, RSS MiB / young generation MiB: at ready, then seconds after the load\n`);
    for (const [i, [at]] of results[0]!.memory.entries()) {
      const cells = results.map((r) => {
        const m = r.memory[i];
        return (m === undefined ? '-' : `${m[1].toFixed(1)} / ${m[2].toFixed(0)}`).padStart(width);
      });
      process.stdout.write(`${(at < 0 ? 'ready' : `${at} s`).padEnd(38)}${cells.join('')}\n`);
    }
  }
} finally {
  await squid.stop();
  await socks.stop();
  await target.proc.stop();
  rmSync(dir, { recursive: true, force: true });
}
