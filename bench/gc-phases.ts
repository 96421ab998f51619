// Where a scavenge's time goes, per new tunnel (M2's load): each gateway — the minimal gateway or a build (`rotor
// start` as `npm start` runs it) — runs in turn behind the same squid, microsocks and target with V8's
// `--trace-gc-nvp`, and the name=value lines of the collections during the measured load (after a warm-up) are
// summed by phase and divided by the tunnels completed: the pause, and the phases V8 times on the main thread
// (the roots, the remembered sets, the parallel copy, the weak handles, the array buffers' sweep, ...). With bytes
// copied and promoted beside them, it tells a scavenge that keeps more from one that scans more to find it.
//
//   node --import tsx bench/gc-phases.ts [--case connect|socks5] [--warmup 5] [--seconds 4] [--top 24] minimal DIR ...
//
// `SPEC::FLAG,FLAG` runs that gateway with these node options added (e.g. `/tmp/b::--heap-growing-percent=0`).
//
// A DIR is a build directory as bench/ab.ts takes (bin/, dist/, package.json; ab-config.json merged into its config).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { stopChild } from '../test/support/upstreams.ts';
import { benchConfig, npmStartCommand, withBuildConfig } from './daemon.ts';
import { startJsonChild, startMicrosocks, startSquid, threadCpuMs } from './procs.ts';
import { runLoad } from './rate-tunnels.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    case: { type: 'string', default: 'socks5' },
    warmup: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '4' },
    top: { type: 'string', default: '24' },
  },
});
const kind = values.case.toLowerCase();
if (kind !== 'connect' && kind !== 'socks5') throw new Error('--case is connect or socks5');
if (positionals.length === 0) throw new Error('usage: bench/gc-phases.ts [--case connect|socks5] minimal DIR ...');

const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
const socks = await startMicrosocks('bench', 'unused');
const squid = await startSquid();
const work = mkdtempSync(join(tmpdir(), 'rotor-gc-phases-'));

interface Run {
  label: string;
  ops: number;
  /** Sums over the measured part's scavenges (gc=s) by field, and the count. */
  scavenge: Map<string, number>;
  scavenges: number;
  others: number;
  otherPause: number;
  cpuMain: number;
  cpuOther: number;
}

/** Starts a gateway with --trace-gc-nvp; `lines` gets every nvp line it prints from then on. */
async function start(
  label: string,
  n: number,
  onLine: (line: string) => void,
): Promise<{ child: ChildProcess; http: number; socks5: number }> {
  const [spec = '', extra = ''] = label.split('::');
  const flags = extra === '' ? [] : extra.split(',');
  let args: string[];
  let env = { ...process.env } as Record<string, string>;
  for (const k of Object.keys(env)) if (k.startsWith('ROTOR_')) delete env[k];
  let cwd = work;
  if (spec === 'minimal') {
    const minimal = {
      user: SOCKS_USER,
      password: BENCH_PASSWORD,
      http: { port: squid.port },
      socks5: { port: socks.port, username: socks.username, password: socks.password },
    };
    args = [...flags, '--trace-gc-nvp', '--import', 'tsx', join(HERE, 'minimal.ts'), JSON.stringify(minimal)];
    cwd = join(HERE, '..');
  } else {
    const root = resolve(spec);
    const dir = mkdtempSync(join(work, `daemon-${n}-`));
    const config = join(dir, 'rotor.yaml');
    writeFileSync(config, stringify(withBuildConfig(root, benchConfig(squid, socks, join(dir, 'rotor.db')))));
    const npm = npmStartCommand(root);
    env = { ...env, ...npm.env, ROTOR_CONFIG: config };
    args = [...npm.nodeFlags, ...flags, '--trace-gc-nvp', join(root, 'bin', 'rotor.js'), 'start'];
    cwd = dir;
  }
  const child = spawn(process.execPath, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${spec}: not ready within 60 s:\n${text.slice(-2000)}`)), 60_000);
    child.once('exit', (code) => fail(new Error(`${spec} exited (${code}):\n${text.slice(-2000)}`)));
    let ready = false;
    let rest = '';
    child.stderr!.on('data', (c: Buffer) => (text = (text + c.toString()).slice(-8192)));
    child.stdout!.on('data', (c: Buffer) => {
      const lines = (rest + c.toString()).split('\n');
      rest = lines.pop()!;
      for (const line of lines) {
        // "[pid:isolate]   N ms: pause=… mutator=… gc=s …"
        const nvp = line.indexOf(' ms: pause=');
        if (nvp >= 0) {
          if (ready) onLine(line.slice(nvp + 5));
          continue;
        }
        text = (text + line + '\n').slice(-8192);
        if (ready) continue;
        if (spec === 'minimal' && line.startsWith('{"http"')) {
          const info = JSON.parse(line) as { http: number; socks5: number };
          ready = true;
          clearTimeout(timer);
          ok({ child, ...info });
        } else if (spec !== 'minimal' && line.includes('rotor is ready')) {
          const rec = JSON.parse(line) as { http: { port: number }; socks5: { port: number } };
          ready = true;
          clearTimeout(timer);
          ok({ child, http: rec.http.port, socks5: rec.socks5.port });
        }
      }
    });
  });
}

const runs: Run[] = [];
try {
  for (const [n, spec] of positionals.entries()) {
    let measuring = false;
    const run: Run = { label: spec, ops: 0, scavenge: new Map(), scavenges: 0, others: 0, otherPause: 0, cpuMain: 0, cpuOther: 0 };
    const g = await start(spec, n, (line) => {
      if (!measuring) return;
      const fields = new Map<string, string>();
      for (const kv of line.trim().split(/\s+/)) {
        const at = kv.indexOf('=');
        if (at > 0) fields.set(kv.slice(0, at), kv.slice(at + 1));
      }
      if (fields.get('gc') !== 's') {
        run.others++;
        run.otherPause += Number(fields.get('pause') ?? 0);
        return;
      }
      run.scavenges++;
      for (const [k, v] of fields) {
        const x = Number(v);
        if (Number.isFinite(x)) run.scavenge.set(k, (run.scavenge.get(k) ?? 0) + x);
      }
    });
    try {
      const gateway = { http: g.http, socks5: g.socks5 };
      const user = spec.startsWith('minimal') ? SOCKS_USER : HTTP_USER;
      await runLoad({ kind, gateway, user, targetPort: target.info.port, seconds: Number(values.warmup) });
      const before = threadCpuMs(g.child.pid!);
      measuring = true;
      run.ops = await runLoad({ kind, gateway, user, targetPort: target.info.port, seconds: Number(values.seconds) });
      // The last collection's line may follow the load's end by a moment.
      await new Promise((r) => setTimeout(r, 200));
      measuring = false;
      const after = threadCpuMs(g.child.pid!);
      run.cpuMain = after.main - before.main;
      run.cpuOther = after.other - before.other;
    } finally {
      await stopChild(g.child, 30_000);
    }
    runs.push(run);
    process.stderr.write(`${spec}: ${run.ops} tunnels, ${run.scavenges} scavenges, ${run.others} other collections\n`);
  }
} finally {
  await Promise.all([target.proc.stop(), socks.stop(), squid.stop()]);
  rmSync(work, { recursive: true, force: true });
}

// Times (ms) as µs per tunnel; byte counts (promoted, semi_space_copied, ...) as bytes per tunnel.
const keys = new Set<string>();
for (const r of runs) for (const k of r.scavenge.keys()) keys.add(k);
const isBytes = (k: string): boolean => /promoted|copied|allocated|size|committed|survived|bytes|objects/.test(k) && !/rate/.test(k);
const rows = [...keys]
  .filter(
    (k) =>
      !/^(gc|reduce_memory|time_to_safepoint|mutator|start_object_size|end_object_size|start_holes_size|end_holes_size|.*_rate)$/.test(k) ||
      k === 'pause',
  )
  .map((k) => ({ k, per: runs.map((r) => (r.scavenge.get(k) ?? 0) / Math.max(1, r.ops) / (isBytes(k) ? 1 : 0.001)) }))
  .sort((a, b) => Math.max(...b.per) - Math.max(...a.per));
const width = 14;
process.stdout.write(`\nScavenges per tunnel (--case ${kind}; times µs per tunnel, sizes bytes per tunnel):\n`);
process.stdout.write(`  ${''.padEnd(34)}${runs.map((r) => r.label.slice(-width).padStart(width)).join('')}\n`);
process.stdout.write(`  ${'tunnels'.padEnd(34)}${runs.map((r) => String(r.ops).padStart(width)).join('')}\n`);
process.stdout.write(
  `  ${'scavenges per 1,000'.padEnd(34)}${runs.map((r) => ((1000 * r.scavenges) / Math.max(1, r.ops)).toFixed(2).padStart(width)).join('')}\n`,
);
process.stdout.write(
  `  ${'other collections, pause µs/tunnel'.padEnd(34)}${runs.map((r) => `${r.others}: ${((1000 * r.otherPause) / Math.max(1, r.ops)).toFixed(2)}`.padStart(width)).join('')}\n`,
);
process.stdout.write(
  `  ${'CPU µs/tunnel, main + other'.padEnd(34)}${runs.map((r) => `${((1000 * r.cpuMain) / Math.max(1, r.ops)).toFixed(1)}+${((1000 * r.cpuOther) / Math.max(1, r.ops)).toFixed(1)}`.padStart(width)).join('')}\n`,
);
for (const { k, per } of rows.slice(0, Number(values.top)))
  process.stdout.write(`  ${k.padEnd(34)}${per.map((x) => x.toFixed(isBytes(k) ? 0 : 3).padStart(width)).join('')}\n`);
