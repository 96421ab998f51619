// Counts per plain-HTTP request (M1's load) or per new tunnel (--case connect|socks5: M2's load) that the
// machine's load does not move: the async resources a gateway creates (promises, timers, immediates, sockets),
// the listeners added to and removed from its sockets by event, and process.nextTick calls. Each gateway — a
// build (`rotor start` as `npm start` runs it) or the minimal gateway — runs in turn behind the same squid,
// microsocks and target with bench/counts-preload.mjs; after a warm-up second, the counts over the measured
// part are divided by the operations the client completed. Each of them is work in node's C++ or in its
// megamorphic stream code.
//
//   node --import tsx bench/counts.ts [--case M1|connect|socks5] [--seconds 3] [--top 30] minimal DIR_A [DIR_B ...]
//
// A DIR is a build directory as bench/ab.ts takes (bin/, dist/, package.json); `.` is this checkout.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchConfig, npmStartCommand, spawnRotor } from './daemon.ts';
import { startJsonChild, startMicrosocks, startSquid, type Proc } from './procs.ts';
import { runLoad } from './rate-tunnels.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const PRELOAD = join(HERE, 'counts-preload.mjs');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seconds: { type: 'string', default: '3' },
    case: { type: 'string', default: 'M1' },
    top: { type: 'string', default: '30' },
  },
});
const kind = values.case.toLowerCase();
if (kind !== 'm1' && kind !== 'connect' && kind !== 'socks5') throw new Error('--case is M1, connect or socks5');
if (positionals.length === 0) throw new Error('usage: bench/counts.ts [--case M1|connect|socks5] minimal DIR_A [DIR_B ...]');
const per = kind === 'm1' ? 'request' : 'tunnel';

type Counts = Record<string, number>;

/** The preload's counts a little after now (it writes every 100 ms). */
async function readCounts(file: string): Promise<Counts> {
  await sleep(300);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Counts) : {};
}

const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
const socks = await startMicrosocks('bench', 'unused');
const squid = await startSquid();
const dir = mkdtempSync(join(tmpdir(), 'rotor-counts-'));

/** One gateway measured: counts per operation over the measured part. */
async function measure(which: string, n: number): Promise<{ label: string; ops: number; per: Counts }> {
  const file = join(dir, `${n}.json`);
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
    const { info, proc } = await startJsonChild<{ http: number; socks5: number; pid: number }>(process.execPath, [
      '--import',
      PRELOAD,
      '--import',
      'tsx',
      join(HERE, 'minimal.ts'),
      JSON.stringify(spec),
    ]);
    delete process.env.ROTOR_COUNTS_FILE;
    gateway = { ...proc, http: info.http, socks5: info.socks5 };
    user = SOCKS_USER;
  } else {
    const root = resolve(which);
    const start = npmStartCommand(root);
    gateway = await spawnRotor(
      (d) => benchConfig(squid, socks, join(d, 'rotor.db')),
      [...start.nodeFlags, '--import', PRELOAD],
      60_000,
      { ...start.env, ROTOR_COUNTS_FILE: file },
      { root },
    );
    user = HTTP_USER;
  }
  try {
    const run = (seconds: number): Promise<number> => runLoad({ kind, gateway, user, targetPort: target.info.port, seconds });
    await run(1);
    const before = await readCounts(file);
    const ops = await run(Number(values.seconds));
    const after = await readCounts(file);
    const perOp: Counts = {};
    for (const [k, v] of Object.entries(after)) {
      const d = v - (before[k] ?? 0);
      if (d > 0) perOp[k] = d / ops;
    }
    return { label: which, ops, per: perOp };
  } finally {
    await gateway.stop();
  }
}

try {
  const results: { label: string; ops: number; per: Counts }[] = [];
  for (const [i, which] of positionals.entries()) results.push(await measure(which, i));
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
} finally {
  await squid.stop();
  await socks.stop();
  await target.proc.stop();
  rmSync(dir, { recursive: true, force: true });
}
