// Users at scale (issue 15): with 10,000 users created through the admin API, does a new tunnel cost what it
// costs with one user, does the idle daemon stay idle, and does /metrics stay bounded?
//
// Two real daemons (`rotor start` as `npm start` runs it: compiled dist/ with its node options; embedded
// sandbox handing out Debian's microsocks as the drawn line, accounting on SQLite, default timers) run side
// by side: `one` with its config user alone, `many`
// with the same config user plus N users POSTed to /v1/users (the whole creation path: scrypt hash, journal,
// the sandbox's sub account and limit). Then:
//   idle  both daemons' own CPU (user + sys from /proc/<pid>/stat) over the same window with no traffic;
//   M2    new tunnels per second (bench/client.ts `rate`: one small request per tunnel, `concurrency` at a
//         time, the config user, both daemons on the same microsocks and target) in many short rounds, the
//         two daemons interleaved (the order alternates each round) so the shared machine's load falls on
//         both alike. Per round: tunnels/s of each and the daemon's CPU per tunnel; reported as the median
//         of the per-round ratios many/one with their spread (quartiles). CPU per tunnel is what load on the
//         machine changes least: tunnels/s moves with whatever else runs, CPU time per tunnel barely does.
//   /metrics of `many`: bytes, samples, per-user series.
//
//   node --import tsx bench/users-scale.ts [--users 10000] [--rounds 16] [--ms 2000] [--idle-ms 60000]
//                                          [--concurrency 32] [--kind connect|socks5] [--smoke] [--profile DIR]
//
// --smoke: 200 users, 3 rounds of 300 ms, 2 s idle (checks the bench runs). The idle window is 60 s by
// default so that it holds every periodic job at its default interval (the platform limit sync's is 60 s).
// --profile DIR: both daemons write --cpu-prof profiles into DIR (read them with bench/profile.ts).
// Most of a run is the creation of the users: each POST hashes its password with scrypt (~40 ms of CPU on
// libuv's pool), so 10,000 take 3–4 minutes on a quiet 2-core machine; the measurement after it, ~2.5 min.
import { fork } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { UpstreamDaemon } from '../test/support/upstreams.ts';
import type { ClientJob, ClientReply, ProxySpec, RateResult } from './client.ts';
import { ensureBuilt, npmStartCommand, npmStartNodeFlags, SOCKS_PRODUCT, spawnRotor, type Daemon } from './daemon.ts';
import { BenchSetupError, cpuMs, rssBytes, startJsonChild, startMicrosocks } from './procs.ts';
import { BENCH_PASSWORD, SOCKS_USER } from './spec.ts';
import { fmt, median } from './stats.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const TOKEN = 'users-scale-token-91f0';
const UP_USER = 'upuser';
const UP_PASS = 'up-pass';

export type ScaleDaemon = Daemon;

/** `rotor start` as `npm start` runs it (bench/daemon.ts spawnRotor) with its config user alone; `nodeFlags` go to node too. */
export function startScaleDaemon(upstream: UpstreamDaemon, nodeFlags: string[] = []): Promise<ScaleDaemon> {
  return spawnRotor(
    (dir) => ({
      platform: {
        mode: 'embedded',
        sandbox: { drawnLines: { [SOCKS_PRODUCT]: [`socks5://${UP_USER}:${UP_PASS}@127.0.0.1:${upstream.port}`] } },
      },
      proxy: { http: { host: '127.0.0.1', port: 0 }, socks5: { host: '127.0.0.1', port: 0 } },
      admin: { host: '127.0.0.1', port: 0, token: TOKEN },
      callback: { host: '127.0.0.1', port: 0 },
      store: { path: join(dir, 'rotor.db') },
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
    }),
    [...npmStartNodeFlags(), ...nodeFlags],
    120_000,
    npmStartCommand().env,
  );
}

/** POSTs `count` users to /v1/users, 8 at a time; resolves with the seconds it took. */
export async function createUsers(admin: number, count: number, log: (line: string) => void): Promise<number> {
  const started = Date.now();
  let next = 0;
  let failed = 0;
  const periods = ['month', 'day', 'total'] as const;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const n = next++;
      const name = `u${String(n).padStart(5, '0')}`;
      const res = await fetch(`http://127.0.0.1:${admin}/v1/users`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
        // A reseller's customers: a byte quota per month, day or lifetime, all on the bench's main account.
        body: JSON.stringify({
          name,
          password: `${name}-secret-pw`,
          mainAccount: 'bench',
          product: SOCKS_PRODUCT,
          quota: { bytes: 10 * 1024 ** 3, period: periods[n % 3] },
        }),
      });
      const text = await res.text();
      if (res.status !== 201 && ++failed <= 3) log(`  POST ${name}: ${res.status} ${text.slice(0, 200)}`);
      if (n % 1000 === 999) log(`  ${n + 1} users after ${((Date.now() - started) / 1000).toFixed(0)} s`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  if (failed > 0) throw new BenchSetupError(`${failed} of ${count} users were not created`);
  return (Date.now() - started) / 1000;
}

export interface LoadClient {
  rate(proxy: ProxySpec, target: number, concurrency: number, durationMs: number): Promise<RateResult>;
  stop(): void;
}

export function startClient(): Promise<LoadClient> {
  return new Promise((resolveClient, reject) => {
    const child = fork(join(HERE, 'client.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.once('error', reject);
    child.once('message', () =>
      resolveClient({
        rate: (proxy, target, concurrency, durationMs) =>
          new Promise((res, rej) => {
            child.once('message', (reply: ClientReply) => (reply.ok ? res(reply.result as RateResult) : rej(new Error(reply.error))));
            child.send({ op: 'rate', proxy, target, concurrency, durationMs } satisfies ClientJob);
          }),
        stop: () => child.disconnect(),
      }),
    );
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The 25th and 75th percentiles (the spread printed beside a median). */
function quartiles(values: readonly number[]): [number, number] {
  const v = [...values].filter(Number.isFinite).sort((a, b) => a - b);
  const at = (p: number): number => v[Math.min(v.length - 1, Math.max(0, Math.round(p * (v.length - 1))))]!;
  return [at(0.25), at(0.75)];
}

function grid(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(headers), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      users: { type: 'string' },
      rounds: { type: 'string' },
      ms: { type: 'string' },
      'idle-ms': { type: 'string' },
      concurrency: { type: 'string', default: '32' },
      kind: { type: 'string', default: 'connect' },
      smoke: { type: 'boolean', default: false },
      profile: { type: 'string' },
    },
  });
  const smoke = values.smoke;
  const users = Number(values.users ?? (smoke ? 200 : 10_000));
  const rounds = Number(values.rounds ?? (smoke ? 3 : 16));
  const ms = Number(values.ms ?? (smoke ? 300 : 2000));
  const idleMs = Number(values['idle-ms'] ?? (smoke ? 2000 : 60_000));
  const concurrency = Number(values.concurrency);
  const kind = values.kind === 'socks5' ? 'socks5' : 'connect';
  const log = (line: string): void => void process.stdout.write(`${line}\n`);
  const flags = values.profile
    ? (mkdirSync(values.profile, { recursive: true }), ['--cpu-prof', `--cpu-prof-dir=${resolve(values.profile)}`])
    : [];

  ensureBuilt(log);
  const upstream = await startMicrosocks(UP_USER, UP_PASS);
  const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
  const client = await startClient();
  const one = await startScaleDaemon(upstream, flags);
  const many = await startScaleDaemon(upstream, flags);
  const daemons = { one, many };
  try {
    log(
      `machine: ${cpus().length} CPUs, load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
    const created = await createUsers(many.admin, users, log);
    log(
      `created ${users} users through POST /v1/users in ${created.toFixed(1)} s (${((created * 1000) / users).toFixed(1)} ms each, 8 at a time)`,
    );
    const listed = await fetch(`http://127.0.0.1:${many.admin}/v1/users?limit=1`, { headers: { authorization: `Bearer ${TOKEN}` } });
    await listed.text();

    // Warm-up: each daemon's pool draws its node, the first check of the password pays its scrypt hash, and
    // both run the tunnel load long enough for the JIT and V8's young generation to settle on it (the
    // creations left `many`'s heap tuned to their churn; a one-second warm-up measured that, not the users).
    const proxy = (d: ScaleDaemon): ProxySpec => ({
      kind,
      port: kind === 'connect' ? d.http : d.socks5,
      username: SOCKS_USER,
      password: BENCH_PASSWORD,
    });
    for (let i = 0; i < (smoke ? 1 : 4); i++) for (const d of [one, many]) await client.rate(proxy(d), target.info.port, concurrency, ms);
    // What the creations left behind (the lists rebuilt after a burst, the first flush) settles first.
    await sleep(smoke ? 500 : 5000);

    // Idle: no traffic, both daemons over the same window.
    const idleBefore = { one: cpuMs(one.pid), many: cpuMs(many.pid) };
    const idleStarted = performance.now();
    await sleep(idleMs);
    const idleSeconds = (performance.now() - idleStarted) / 1000;
    const idle = { one: (cpuMs(one.pid) - idleBefore.one) / idleSeconds, many: (cpuMs(many.pid) - idleBefore.many) / idleSeconds };

    // M2, interleaved.
    const per: Record<'one' | 'many', { rate: number; cpu: number }[]> = { one: [], many: [] };
    let failures = 0;
    for (let r = 0; r < rounds; r++) {
      const order: ('one' | 'many')[] = r % 2 === 0 ? ['one', 'many'] : ['many', 'one'];
      for (const which of order) {
        const d = daemons[which];
        const before = cpuMs(d.pid);
        const res = await client.rate(proxy(d), target.info.port, concurrency, ms);
        const spent = cpuMs(d.pid) - before;
        failures += res.errors;
        per[which].push({ rate: res.perSecond, cpu: spent / Math.max(1, res.completed) });
      }
    }
    const rateRatio = per.one.map((o, i) => per.many[i]!.rate / o.rate);
    const cpuRatio = per.one.map((o, i) => per.many[i]!.cpu / o.cpu);

    const text = await (await fetch(`http://127.0.0.1:${many.admin}/metrics`)).text();
    // The V8 heap in use (prom-client's default metrics): what the users cost in memory, creation's garbage aside.
    const heapMiB = async (d: ScaleDaemon): Promise<number> => {
      const body = d === many ? text : await (await fetch(`http://127.0.0.1:${d.admin}/metrics`)).text();
      return Number(/^rotor_nodejs_heap_size_used_bytes (\S+)$/m.exec(body)?.[1] ?? NaN) / 1024 ** 2;
    };
    const heap = { one: await heapMiB(one), many: await heapMiB(many) };
    const samples = text.split('\n').filter((l) => l && !l.startsWith('#'));
    const perUser = samples.filter((l) => /[{,]user="/.test(l));

    const q = (xs: number[], d = 3): string => {
      const [lo, hi] = quartiles(xs);
      return `${fmt(median(xs), d)} (${fmt(lo, d)}–${fmt(hi, d)})`;
    };
    log('');
    log(
      `Users at scale: 1 user against ${users + 1} (${users} made through POST /v1/users); M2 ${kind.toUpperCase()}, ${rounds} rounds of ${ms} ms, ${concurrency} at a time`,
    );
    log(
      grid(
        ['figure', '1 user', `${users + 1} users`, 'many / one: median of rounds (quartiles)'],
        [
          [
            'tunnels/s, median (quartiles)',
            q(
              per.one.map((x) => x.rate),
              4,
            ),
            q(
              per.many.map((x) => x.rate),
              4,
            ),
            q(rateRatio),
          ],
          ['daemon CPU per tunnel, ms', q(per.one.map((x) => x.cpu)), q(per.many.map((x) => x.cpu)), q(cpuRatio)],
          [`idle CPU, ms per s (${idleSeconds.toFixed(0)} s)`, fmt(idle.one), fmt(idle.many), fmt(idle.many / idle.one)],
          [
            'RSS after the run, MiB',
            fmt(rssBytes(one.pid) / 1024 ** 2),
            fmt(rssBytes(many.pid) / 1024 ** 2),
            fmt(rssBytes(many.pid) / rssBytes(one.pid)),
          ],
          ['V8 heap used after the run, MiB', fmt(heap.one), fmt(heap.many), fmt(heap.many / heap.one)],
        ],
      ),
    );
    log(
      `failed tunnels: ${failures}; load after: ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
    log(
      `/metrics with ${users + 1} users: ${text.length} bytes, ${samples.length} samples, ${perUser.length} per-user series (bound: 4 × metrics.userSeriesMax = 400)`,
    );
  } finally {
    client.stop();
    await target.proc.stop();
    await Promise.all([one.stop(), many.stop()]);
    await upstream.stop();
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
