// A/B of Rotor builds on a shared machine: two or more `rotor start` builds (each a directory holding bin/
// and dist/, e.g. a copy of this checkout's before a change) and the minimal gateway in front of the same
// squid, microsocks and target, measured in interleaved rounds (the order rotates every round) so that the
// machine's load hits every build alike; each runs as `npm start` runs it (node options from package.json).
// Per round and gateway: M2 (CONNECT and SOCKS5 new tunnels, the
// rate job of bench/client.ts) and optionally M1 (wrk) and M4 (sequential fresh tunnels); gateway CPU per
// operation from /proc, main thread and other threads apart. What it prints to judge a change
// by: each later build's CPU per tunnel against the first build's, paired round by round (median ratio),
// and the main thread's CPU per tunnel summed over all rounds (robust when single rounds are not); for M2 also
// the rest of the chain's CPU per tunnel (the upstream proxy, the load client, the target).
//
//   node --import tsx bench/ab.ts [--rounds 6] [--seconds 2] [--warmup 1] [--cases M2,M4,M1] [--paced N] [--greeting] [--profile DIR] [--strace DIR] DIR_A DIR_B [DIR_C ...]
//
// A build directory may hold ab-config.json: merged into that build's config (the same build with one setting
// changed, to measure what the setting costs: e.g. {"log":{"access":{"store":false}}}). `DIR@N` runs that build
// with --max-semi-space-size=N instead of its package.json's (e.g. `/tmp/b /tmp/b@8 /tmp/b@16`).
//
// Make DIR_A with: mkdir /tmp/a && cp -r dist bin package.json /tmp/a && ln -s "$PWD/node_modules" /tmp/a/
// (after `npm run build`), then change, rebuild, and pass the checkout itself as DIR_B.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { stopChild } from '../test/support/upstreams.ts';
import type { ClientJob, ClientReply, LatencyResult, ProxySpec, RateResult } from './client.ts';
import { benchConfig, npmStartCommand, parseGatewaySpec, withBuildConfig, withSemiSpace } from './daemon.ts';
import { cpuMs, startJsonChild, startMicrosocks, startSquid, threadCpuMs, type Proc } from './procs.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';
import { runWrk } from './wrk.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '6' },
    seconds: { type: 'string', default: '2' },
    warmup: { type: 'string', default: '1' },
    cases: { type: 'string', default: 'M2' },
    // M2 at an offered rate of N new tunnels/s (bench/client.ts 'paced') instead of as fast as 32 clients go: every
    // gateway carries the same load, so CPU per tunnel is the work per tunnel, without the saving per tunnel a
    // faster gateway gets from handling more of them per wake-up of its event loop.
    paced: { type: 'string' },
    // Each Rotor build's V8 CPU profile (--cpu-prof) into DIR/<build>/ on exit (summarise with bench/profile.ts).
    profile: { type: 'string' },
    // System calls per M2 tunnel and per M1 request, by name, each gateway's process traced alone (strace -c -f) for
    // one extra round after the timed ones; the summaries also go to DIR/<gateway>-<case>.txt.
    strace: { type: 'string' },
    // The same extra round under `perf record -g` (cpu-clock), every gateway run with --perf-basic-prof so that
    // its JS frames have names: DIR/<gateway>-<case>.data, for `perf report -i FILE --no-children`.
    perf: { type: 'string' },
    // During each M2 SOCKS5 round, a probe in this process opens a connection to the gateway every 5 ms (one at a
    // time), sends a SOCKS5 greeting and times the method answer: a step that touches no upstream, so its time is
    // how long the gateway's event-loop turns keep a new client waiting under the load. p50 and p90 per gateway.
    // Every gateway gets the same probe (some hundreds of connections per round); CPU per tunnel counts them in.
    greeting: { type: 'boolean', default: false },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const cases = values.cases.toUpperCase().split(',');
const pacedRate = values.paced === undefined ? 0 : Number(values.paced);
if (values.paced !== undefined && !(pacedRate > 0)) throw new Error('--paced takes new tunnels per second, e.g. --paced 800');
/** One M2 measurement: as fast as 32 clients go, or at --paced's rate. */
const m2Job = (p: ProxySpec): ClientJob =>
  pacedRate > 0
    ? { op: 'paced', proxy: p, target: tport, perSecond: pacedRate, concurrency: 32, durationMs: seconds * 1000 }
    : { op: 'rate', proxy: p, target: tport, concurrency: 32, durationMs: seconds * 1000 };
if (positionals.length < 1) throw new Error('usage: bench/ab.ts [--rounds N] [--seconds S] [--cases M2,M4,M1] DIR_A [DIR_B ...]');

// CPU per gateway: main thread, other threads, and the kernel's share (on loopback mostly the socket calls).
const cpu = threadCpuMs;

interface Gw {
  name: string;
  pid: number;
  http: number;
  socks5: number;
  rotor: boolean;
  stop: () => Promise<void>;
}

async function startRotor(
  root: string,
  http: Parameters<typeof benchConfig>[0],
  socks: Parameters<typeof benchConfig>[1],
  name: string,
  semiSpace: string | undefined,
): Promise<Gw> {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-ab-'));
  const config = join(dir, 'rotor.yaml');
  writeFileSync(config, stringify(withBuildConfig(root, benchConfig(http, socks, join(dir, 'rotor.db')))));
  const env = { ...process.env } as Record<string, string>;
  for (const k of Object.keys(env)) if (k.startsWith('ROTOR_')) delete env[k];
  // As `npm start` runs it (its environment and node options from the build's own package.json), like `npm run bench`.
  const start = npmStartCommand(root);
  Object.assign(env, start.env, { ROTOR_CONFIG: config });
  const profile = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(resolve(values.profile), name.replace(/[^\w.-]/g, '_'))}`] : [];
  if (values.perf) profile.push('--perf-basic-prof');
  const child = spawn(
    process.execPath,
    [...withSemiSpace(start.nodeFlags, semiSpace), ...profile, join(root, 'bin', 'rotor.js'), 'start'],
    {
      cwd: dir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  const ports = await new Promise<{ http: number; socks5: number }>((res, rej) => {
    child.once('exit', (code) => rej(new Error(`${root}: rotor start exited (${code}):\n${out.slice(-2000)}`)));
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const at = out.indexOf('rotor is ready');
      const end = at < 0 ? -1 : out.indexOf('\n', at);
      if (end < 0) return;
      const rec = JSON.parse(out.slice(out.lastIndexOf('\n', at) + 1, end)) as { http: { port: number }; socks5: { port: number } };
      child.removeAllListeners('exit');
      child.stdout!.removeAllListeners('data');
      child.stderr!.removeAllListeners('data');
      child.stdout!.resume();
      child.stderr!.resume();
      res({ http: rec.http.port, socks5: rec.socks5.port });
    });
  });
  return {
    name,
    pid: child.pid!,
    ...ports,
    rotor: true,
    stop: async () => {
      await stopChild(child, 15_000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const client: ChildProcess = fork(join(HERE, 'client.ts'), [], {
  execArgv: ['--import', 'tsx'],
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
});
await new Promise((r) => client.once('message', r));
const run = <T>(job: ClientJob): Promise<T> =>
  new Promise((res, rej) => {
    client.once('message', (m: ClientReply) => (m.ok ? res(m.result as T) : rej(new Error(m.error))));
    client.send(job);
  });

const procs: Proc[] = [];
const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
procs.push(target.proc);
const tport = target.info.port;
const socks = await startMicrosocks('upuser', 'up-pass');
procs.push(socks);
const squid = await startSquid();
procs.push(squid);
const spec = {
  user: SOCKS_USER,
  password: BENCH_PASSWORD,
  http: { port: squid.port },
  socks5: { port: socks.port, username: socks.username, password: socks.password },
};
const minimal = await startJsonChild<{ http: number; socks5: number; pid: number }>(process.execPath, [
  ...(values.perf ? ['--perf-basic-prof'] : []),
  '--import',
  'tsx',
  join(HERE, 'minimal.ts'),
  JSON.stringify(spec),
]);
procs.push(minimal.proc);
const gws: Gw[] = [
  { name: 'minimal', pid: minimal.info.pid, http: minimal.info.http, socks5: minimal.info.socks5, rotor: false, stop: async () => {} },
];
for (const [i, spec] of positionals.entries()) {
  const { which, semiSpace } = parseGatewaySpec(spec);
  const label = `${String.fromCharCode(65 + i)}:${basename(resolve(which))}${semiSpace === undefined ? '' : `@${semiSpace}`}`;
  gws.push(await startRotor(resolve(which), squid, socks, label, semiSpace));
}

const proxy = (g: Gw, proto: 'connect' | 'socks5') =>
  proto === 'connect'
    ? ({ kind: 'connect', port: g.http, username: g.rotor ? HTTP_USER : SOCKS_USER, password: BENCH_PASSWORD } as const)
    : ({ kind: 'socks5', port: g.socks5, username: SOCKS_USER, password: BENCH_PASSWORD } as const);

/** M1's load: 50 kept-alive wrk connections of plain-HTTP requests through the gateway for `seconds`. */
const plainHttpLoad = (g: Gw, targetPort: number, seconds: number) => {
  const p = proxy(g, 'connect');
  return runWrk({ proxyPort: p.port, targetPort, username: p.username, password: p.password, connections: 50, durationSeconds: seconds });
};

// Warm-up: JIT and caches on every path; not recorded. M1's too when it is measured: its first round otherwise
// counted the compiling of the plain-HTTP path (`npm run bench` warms every case it tables the same way).
// --warmup N: N seconds of each (default 1). The optimizing compiler keeps working on a daemon's path for some
// 10 s of load (bench/jit.ts), the minimal gateway's few functions for less: a short warm-up counts that one-time
// work into the first rounds' CPU per operation.
const warmupSeconds = Number(values.warmup);
for (const g of gws) {
  for (const p of ['connect', 'socks5'] as const)
    await run({ op: 'rate', proxy: proxy(g, p), target: tport, concurrency: 32, durationMs: warmupSeconds * 1000 });
  if (cases.includes('M1')) await plainHttpLoad(g, tport, warmupSeconds);
}

/** key -> gateway -> per round [rate or p50, CPU ms per op] */
const res = new Map<string, Map<string, Array<[number, number]>>>();
/** --paced: tunnels a gateway started behind their slot (it did not keep up with the offered rate) */
const lateTunnels = new Map<string, number>();
const mainTotals = new Map<string, { main: number; other: number; sys: number; ops: number }>();
/**
 * The rest of each M2 tunnel's chain, by gateway and protocol: the upstream proxy's CPU (squid for CONNECT,
 * microsocks for SOCKS5), the load client's and the target's, ms summed over all rounds. A gateway's rate on
 * shared cores depends on the whole chain, not on its own CPU alone: a gateway that makes its upstream or the
 * client work more per tunnel shows it here.
 */
const chainTotals = new Map<string, { up: number; client: number; target: number; ops: number }>();
const m1Totals = new Map<string, { cpu: number; sys: number; ops: number }>();
/** --greeting: the method answer's time per gateway (ms), over all rounds. */
const greetings = new Map<string, number[]>();
const GREETING = Buffer.from([5, 1, 2]);
/** One greeting at a time, every 5 ms, until stopped: each a new connection, its method answer timed from the write. */
function greetingProbe(port: number): { stop: () => Promise<number[]> } {
  const times: number[] = [];
  let stopping = false;
  const one = (): Promise<void> =>
    new Promise((done) => {
      const s = connect({ host: '127.0.0.1', port, noDelay: true });
      let t0 = 0;
      s.once('connect', () => {
        t0 = performance.now();
        s.write(GREETING);
      });
      s.once('data', () => {
        times.push(performance.now() - t0);
        s.destroy();
        done();
      });
      s.once('error', () => done());
      s.once('close', () => done());
    });
  const loop = (async () => {
    while (!stopping) {
      await one();
      await sleep(5);
    }
  })();
  return {
    stop: async () => {
      stopping = true;
      await loop;
      return times;
    },
  };
}
const push = (k: string, g: string, v: [number, number]): void => {
  if (!res.has(k)) res.set(k, new Map());
  const byG = res.get(k)!;
  if (!byG.has(g)) byG.set(g, []);
  byG.get(g)!.push(v);
};
for (let r = 0; r < rounds; r++) {
  const order = [...gws.slice(r % gws.length), ...gws.slice(0, r % gws.length)];
  for (const g of order) {
    if (cases.includes('M2')) {
      for (const proto of ['connect', 'socks5'] as const) {
        const upPid = proto === 'connect' ? squid.pid : socks.pid;
        const c0 = [cpuMs(upPid), cpuMs(client.pid!), cpuMs(target.proc.pid)];
        const probe = values.greeting && proto === 'socks5' ? greetingProbe(g.socks5) : undefined;
        const a = cpu(g.pid);
        const x = await run<RateResult>(m2Job(proxy(g, proto)));
        const b = cpu(g.pid);
        if (probe) greetings.set(g.name, [...(greetings.get(g.name) ?? []), ...(await probe.stop())]);
        const c1 = [cpuMs(upPid), cpuMs(client.pid!), cpuMs(target.proc.pid)];
        const ck = `${g.name} ${proto}`;
        const ct = chainTotals.get(ck) ?? { up: 0, client: 0, target: 0, ops: 0 };
        chainTotals.set(ck, {
          up: ct.up + c1[0]! - c0[0]!,
          client: ct.client + c1[1]! - c0[1]!,
          target: ct.target + c1[2]! - c0[2]!,
          ops: ct.ops + x.completed,
        });
        if (x.late) lateTunnels.set(g.name, (lateTunnels.get(g.name) ?? 0) + x.late);
        const t = mainTotals.get(g.name) ?? { main: 0, other: 0, sys: 0, ops: 0 };
        mainTotals.set(g.name, {
          main: t.main + b.main - a.main,
          other: t.other + b.other - a.other,
          sys: t.sys + b.sys - a.sys,
          ops: t.ops + x.completed,
        });
        push(`M2 ${proto}${pacedRate > 0 ? ` at ${pacedRate}/s offered` : ''} (tunnels/s, CPU ms/tunnel)`, g.name, [
          x.perSecond,
          (b.main + b.other - a.main - a.other) / x.completed,
        ]);
      }
    }
    if (cases.includes('M4')) {
      for (const proto of ['connect', 'socks5'] as const) {
        const x = await run<LatencyResult>({ op: 'latency', proxy: proxy(g, proto), target: tport, count: 200 });
        push(`M4 ${proto} (p50 ms, mean ms)`, g.name, [x.p50Ms, x.meanMs]);
      }
    }
    if (cases.includes('M1')) {
      const a = cpu(g.pid);
      const w = await plainHttpLoad(g, tport, seconds);
      const b = cpu(g.pid);
      push('M1 (req/s, CPU ms/request)', g.name, [w.requestsPerSecond, (b.main + b.other - a.main - a.other) / w.requests]);
      const t = m1Totals.get(g.name) ?? { cpu: 0, sys: 0, ops: 0 };
      m1Totals.set(g.name, { cpu: t.cpu + b.main + b.other - a.main - a.other, sys: t.sys + b.sys - a.sys, ops: t.ops + w.requests });
    }
  }
}

/** Starts a tracer on pid; the returned function stops it (SIGINT, as its summary wants). */
async function traced(command: string, args: string[], ready: (stderr: string) => boolean): Promise<() => Promise<void>> {
  const st = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  await new Promise<void>((res, rej) => {
    st.once('exit', (code) => rej(new Error(`${command} exited (${code}): ${err}`)));
    st.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      if (ready(err)) setTimeout(res, 200);
    });
    // perf record says nothing until it stops
    if (ready('')) setTimeout(res, 500);
  });
  return async () => {
    st.removeAllListeners('exit');
    const done = new Promise((r) => st.once('exit', r));
    st.kill('SIGINT');
    await done;
  };
}

/** Starts `strace -c -f` on pid; the returned function stops it and gives the calls by name from its summary. */
async function straced(pid: number, file: string): Promise<() => Promise<Map<string, number>>> {
  // Attached when strace names every thread it attached to (its first line on stderr).
  const stop = await traced('strace', ['-c', '-f', '-o', file, '-p', String(pid)], (err) => err.includes('attached'));
  return async () => {
    await stop();
    const calls = new Map<string, number>();
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const f = line.trim().split(/\s+/);
      // % time, seconds, usecs/call, calls, [errors], syscall
      if (f.length >= 5 && /^\d/.test(f[0]!) && /^[a-z_0-9]+$/.test(f[f.length - 1]!) && f[f.length - 1] !== 'total')
        calls.set(f[f.length - 1]!, Number(f[3]));
    }
    return calls;
  };
}

const traceDir = values.strace ?? values.perf;
if (traceDir !== undefined) {
  const dir = resolve(traceDir);
  mkdirSync(dir, { recursive: true });
  const table = new Map<string, Map<string, number>>();
  const measure = async (g: Gw, what: string, job: () => Promise<number>): Promise<void> => {
    const file = join(dir, `${g.name.replace(/[^\w.-]/g, '_')}-${what}`);
    const stop = values.strace
      ? await straced(g.pid, `${file}.txt`)
      : await traced('perf', ['record', '-e', 'cpu-clock', '-F', '1999', '-g', '-p', String(g.pid), '-o', `${file}.data`], () => true).then(
          (s) => async () => (await s(), new Map<string, number>()),
        );
    const ops = await job();
    const calls = await stop();
    const col = `${g.name.slice(0, 10)} ${what}`;
    for (const [name, n] of calls) {
      if (!table.has(name)) table.set(name, new Map());
      table.get(name)!.set(col, n / ops);
    }
    console.log(`strace ${col}: ${ops} operations`);
  };
  const cols: string[] = [];
  for (const g of gws) {
    if (cases.includes('M2'))
      for (const proto of ['connect', 'socks5'] as const) {
        cols.push(`${g.name.slice(0, 10)} ${proto}`);
        await measure(g, proto, async () => {
          const x = await run<RateResult>(m2Job(proxy(g, proto)));
          return x.completed;
        });
      }
    if (cases.includes('M1')) {
      cols.push(`${g.name.slice(0, 10)} M1`);
      await measure(g, 'M1', async () => {
        const w = await plainHttpLoad(g, tport, seconds);
        return w.requests;
      });
    }
  }
  if (values.strace) printCalls(table, cols, dir);
  else console.log(`\nperf data in ${dir} (perf report -i FILE --no-children)`);
}

function printCalls(table: Map<string, Map<string, number>>, cols: string[], dir: string): void {
  console.log(`\nSystem calls per operation (strace -c -f), ${dir}:`);
  console.log(`  ${'call'.padEnd(18)}${cols.map((c) => c.padStart(18)).join('')}`);
  const total = new Map<string, number>();
  for (const [name, byCol] of [...table].sort((a, b) => Math.max(...b[1].values()) - Math.max(...a[1].values()))) {
    console.log(`  ${name.padEnd(18)}${cols.map((c) => (byCol.get(c) ?? 0).toFixed(2).padStart(18)).join('')}`);
    for (const c of cols) total.set(c, (total.get(c) ?? 0) + (byCol.get(c) ?? 0));
  }
  console.log(`  ${'total'.padEnd(18)}${cols.map((c) => (total.get(c) ?? 0).toFixed(2).padStart(18)).join('')}`);
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const f3 = (x: number): string => (x >= 100 ? x.toFixed(0) : x.toFixed(3));
for (const [k, byG] of res) {
  console.log(`\n${k}, medians of ${rounds} rounds [per round]`);
  for (const [g, vals] of byG) {
    console.log(
      `  ${g.padEnd(24)} ${f3(median(vals.map((v) => v[0]))).padStart(7)}  ${f3(median(vals.map((v) => v[1]))).padStart(7)}   [${vals.map((v) => `${f3(v[0])}/${f3(v[1])}`).join(' ')}]`,
    );
  }
  const names = gws.map((g) => g.name);
  const first = byG.get(names[1]!);
  for (const n of names.slice(2)) {
    const other = byG.get(n);
    if (!first || !other) continue;
    const ratios = other.map((v, i) => v[1] / first[i]![1]);
    console.log(`  paired ${n} / ${names[1]}: median ${median(ratios).toFixed(3)} [${ratios.map((x) => x.toFixed(2)).join(' ')}]`);
  }
}
if (mainTotals.size > 0) {
  console.log('\nM2 CPU per tunnel over all rounds, ms (main thread + other threads; of both, in the kernel):');
  for (const [g, t] of mainTotals)
    console.log(
      `  ${g.padEnd(24)} ${(t.main / t.ops).toFixed(3)} + ${(t.other / t.ops).toFixed(3)}  kernel ${(t.sys / t.ops).toFixed(3)}  (${t.ops} tunnels${pacedRate > 0 ? `, ${lateTunnels.get(g) ?? 0} started late` : ''})`,
    );
}
if (chainTotals.size > 0) {
  console.log('\nM2 the rest of the chain over all rounds, CPU ms per tunnel (upstream: squid / microsocks; the load client; the target):');
  for (const [k, t] of chainTotals)
    console.log(
      `  ${k.padEnd(32)} upstream ${(t.up / t.ops).toFixed(3)}  client ${(t.client / t.ops).toFixed(3)}  target ${(t.target / t.ops).toFixed(3)}  (${t.ops} tunnels)`,
    );
}
if (greetings.size > 0) {
  console.log("\nM2 SOCKS5: a new client's greeting answered under the load (--greeting), ms over all rounds:");
  const q = (xs: number[], p: number): number => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
  for (const [g, xs] of greetings) {
    xs.sort((a, b) => a - b);
    console.log(
      `  ${g.padEnd(24)} p50 ${q(xs, 0.5).toFixed(3)}  p90 ${q(xs, 0.9).toFixed(3)}  mean ${(xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3)}  (${xs.length} greetings)`,
    );
  }
}
if (m1Totals.size > 0) {
  console.log('\nM1 CPU per request over all rounds, ms (of it, in the kernel):');
  for (const [g, t] of m1Totals)
    console.log(`  ${g.padEnd(24)} ${(t.cpu / t.ops).toFixed(3)}  kernel ${(t.sys / t.ops).toFixed(3)}  (${t.ops} requests)`);
}
console.log(`load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
for (const g of gws) await g.stop();
for (const p of procs.reverse()) await p.stop();
client.disconnect();
