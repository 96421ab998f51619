// Bulk relaying and V8's major garbage collections: one large download through a CONNECT and a SOCKS5
// tunnel of the minimal gateway and of the real daemon (`rotor start` as `npm start` runs it), with curl as
// the client, reporting MiB/s, the gateway's CPU per MiB and the mark-compacts it ran meanwhile (counted by
// bench/gc-watch.mjs preloaded into both gateways). This is what showed that V8 ran a mark-compact of Rotor's
// whole heap every ~150 ms of bulk traffic (src/startup/heap.ts); M3 of `npm run bench` is too short to see it.
//   node --import tsx bench/gc-bulk.ts [--mib 512] [--reps 2] [--rotor-node-flag FLAG]...
// e.g. `--rotor-node-flag=--heap-growing-percent=0` runs the daemon with V8's own growing factor.
import { execFileSync, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ensureBuilt, npmStartCommand, startDaemon } from './daemon.ts';
import { cpuMs, rssBytes, startJsonChild, startMicrosocks, startSquid, type Proc } from './procs.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';
import { fmt, median } from './stats.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const WATCH = join(HERE, 'gc-watch.mjs');
const { values } = parseArgs({
  options: {
    mib: { type: 'string', default: '512' },
    reps: { type: 'string', default: '2' },
    'rotor-node-flag': { type: 'string', multiple: true },
  },
});
const MIB = Number(values.mib);
const REPS = Number(values.reps);
if (!(MIB >= 16) || !(REPS >= 1)) throw new Error('--mib takes a number >= 16, --reps a whole number >= 1');

interface Watched {
  pid: number;
  http: number;
  socks5: number;
  /** Major GCs so far, as the watcher last printed. */
  majors(): number;
  stop(): Promise<void>;
}

function lastMajors(text: string): number {
  const at = text.lastIndexOf('GCWATCH ');
  if (at < 0) return 0;
  return (JSON.parse(text.slice(at + 8, text.indexOf('\n', at))) as { major: number }).major;
}

async function startMinimal(squidPort: number, socks: { port: number; username: string; password: string }): Promise<Watched> {
  const spec = { user: SOCKS_USER, password: BENCH_PASSWORD, http: { port: squidPort }, socks5: socks };
  const child = spawn(process.execPath, ['--import', WATCH, '--import', 'tsx', join(HERE, 'minimal.ts'), JSON.stringify(spec)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4096)));
  const first = await new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve));
  child.stdout!.resume();
  const info = JSON.parse(first) as { http: number; socks5: number };
  return { pid: child.pid!, ...info, majors: () => lastMajors(err), stop: async () => void child.kill('SIGTERM') };
}

const procs: Proc[] = [];
try {
  ensureBuilt((t) => process.stderr.write(`${t}\n`));
  const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
  procs.push(target.proc);
  const socks = await startMicrosocks('gcu', 'gcp');
  procs.push(socks);
  const squid = await startSquid();
  procs.push(squid);
  const minimal = await startMinimal(squid.port, { port: socks.port, username: socks.username, password: socks.password });
  procs.push(minimal);
  const daemon = await startDaemon(squid, socks, ['--import', WATCH, ...(values['rotor-node-flag'] ?? [])]);
  procs.push(daemon);
  const rotor: Watched = {
    pid: daemon.pid,
    http: daemon.http,
    socks5: daemon.socks5,
    majors: () => lastMajors(daemon.output()),
    stop: () => daemon.stop(),
  };

  const url = (mib: number) => `http://127.0.0.1:${target.info.port}/bytes/${mib * 1024 * 1024}`;
  const proxyArgs = (name: string, g: Watched, proto: string) =>
    proto === 'connect'
      ? ['-p', '-x', `http://${name === 'rotor' ? HTTP_USER : SOCKS_USER}:${BENCH_PASSWORD}@127.0.0.1:${g.http}`]
      : ['-x', `socks5h://${SOCKS_USER}:${BENCH_PASSWORD}@127.0.0.1:${g.socks5}`];
  const settle = () => new Promise((r) => setTimeout(r, 1200)); // the watcher prints once a second
  const rows: Record<string, { mibs: number[]; cpu: number[]; majors: number[] }> = {};
  for (let rep = 0; rep < REPS; rep++) {
    for (const [name, g] of [
      ['minimal', minimal],
      ['rotor', rotor],
    ] as const) {
      for (const proto of ['connect', 'socks5']) {
        const args = proxyArgs(name, g, proto);
        execFileSync('curl', [...args, '-sS', '-o', '/dev/null', url(64)]); // warm-up
        await settle();
        const m0 = g.majors();
        const c0 = cpuMs(g.pid);
        const t0 = process.hrtime.bigint();
        execFileSync('curl', [...args, '-sS', '-o', '/dev/null', url(MIB)]);
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        const cpu = cpuMs(g.pid) - c0;
        await settle();
        const row = (rows[`${name} ${proto}`] ??= { mibs: [], cpu: [], majors: [] });
        row.mibs.push(MIB / s);
        row.cpu.push(cpu / MIB);
        row.majors.push(g.majors() - m0);
      }
    }
  }
  process.stdout.write(
    `${MIB} MiB per download, ${REPS} repetition(s), medians; rotor as npm start runs it (${Object.entries(npmStartCommand().env)
      .map(([k, v]) => `${k}=${v} `)
      .join('')}node ${[...npmStartCommand().nodeFlags, ...(values['rotor-node-flag'] ?? [])].join(' ')})\n`,
  );
  process.stdout.write('| gateway, tunnel | MiB/s | gateway CPU ms per MiB | major GCs per download |\n| --- | ---: | ---: | ---: |\n');
  for (const [k, r] of Object.entries(rows))
    process.stdout.write(`| ${k} | ${fmt(median(r.mibs))} | ${fmt(median(r.cpu))} | ${fmt(median(r.majors))} |\n`);
  process.stdout.write(`rotor RSS after: ${fmt(rssBytes(rotor.pid) / 1024 ** 2)} MiB\n`);
} finally {
  for (const p of procs.reverse()) await p.stop().catch(() => undefined);
}
