// `npm run bench -- --rtt 20`: the upstream distance mode. The bench's upstreams (squid, microsocks with
// user/password) sit behind bench/delay-relay.ts, `rtt` ms away (a round trip for the TCP handshake, half a
// round trip per chunk each way); the client and Rotor stay on loopback, as an application and its local
// gateway do. Fresh tunnels (connect, handshake, one small GET, close), one at a time, interleaved:
//   direct: client -> relay -> upstream -> target          rotor: client -> `rotor start` -> relay -> upstream -> target
// Reports p50/p99 of the time to the response per path and protocol, Rotor/direct, and DrawByPwd calls per
// 1,000 tunnels through Rotor (rotor_draws_total{method="pwd"} from its metrics, over a burst of tunnels).
import { fork } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClientJob, ClientReply, LatencyResult, ProxySpec, RateResult } from './client.ts';
import { ensureBuilt, spawnRotor, benchConfig } from './daemon.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';
import { startJsonChild, startMicrosocks, startSquid, type Proc, type Upstream } from './procs.ts';
import { fmt, median } from './stats.ts';

const HERE = dirname(fileURLToPath(import.meta.url));

function runJob<T>(child: ReturnType<typeof fork>, job: ClientJob): Promise<T> {
  return new Promise((resolve, reject) => {
    child.once('message', (reply: ClientReply) => (reply.ok ? resolve(reply.result as T) : reject(new Error(reply.error))));
    child.send(job);
  });
}

async function draws(adminPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith('rotor_draws_total{') && line.includes('method="pwd"')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

export async function runRtt(options: {
  rttMs: number;
  reps: number;
  count: number;
  burstMs: number;
  log: (s: string) => void;
}): Promise<string> {
  const { rttMs, reps, count, log } = options;
  ensureBuilt(log);
  const procs: Proc[] = [];
  try {
    const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
    procs.push(target.proc);
    const socks = await startMicrosocks('upuser', 'up-pass');
    procs.push(socks);
    const squid = await startSquid();
    procs.push(squid);
    const relay = async (u: Upstream): Promise<Upstream> => {
      const r = await startJsonChild<{ port: number; pid: number }>(process.execPath, [
        '--import',
        'tsx',
        join(HERE, 'delay-relay.ts'),
        JSON.stringify({ upstreamPort: u.port, rttMs }),
      ]);
      procs.push(r.proc);
      return { ...u, port: r.info.port };
    };
    const farSocks = await relay(socks);
    const farSquid = await relay(squid);
    const rotor = await spawnRotor((dir) => {
      const c = benchConfig(farSquid, farSocks, join(dir, 'rotor.db'));
      // The pool's own defaults (low water 2): a gateway line is drawn once, then the pool stays quiet.
      return { ...c, pool: {} };
    });
    procs.push(rotor);
    const client = fork(join(HERE, 'client.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    await new Promise((r) => client.once('message', r));
    const specs: Record<string, ProxySpec> = {
      'direct connect': { kind: 'connect', port: farSquid.port, username: 'none', password: 'none' },
      'direct socks5': { kind: 'socks5', port: farSocks.port, username: farSocks.username, password: farSocks.password },
      'rotor connect': { kind: 'connect', port: rotor.http, username: HTTP_USER, password: BENCH_PASSWORD },
      'rotor socks5': { kind: 'socks5', port: rotor.socks5, username: SOCKS_USER, password: BENCH_PASSWORD },
    };
    // Warm-up: pools drawn, warm sets sized.
    for (const name of ['rotor connect', 'rotor socks5'])
      await runJob<LatencyResult>(client, { op: 'latency', proxy: specs[name]!, target: target.info.port, count: 5 });
    const samples = new Map<string, { p50: number[]; p99: number[] }>();
    const order = Object.keys(specs);
    for (let rep = 0; rep < reps; rep++) {
      const rotated = [...order.slice(rep % order.length), ...order.slice(0, rep % order.length)];
      for (const name of rotated) {
        const r = await runJob<LatencyResult>(client, { op: 'latency', proxy: specs[name]!, target: target.info.port, count });
        const s = samples.get(name) ?? { p50: [], p99: [] };
        s.p50.push(r.p50Ms);
        s.p99.push(r.p99Ms);
        samples.set(name, s);
        log(`  rep ${rep + 1} ${name}: p50 ${fmt(r.p50Ms)} ms, p99 ${fmt(r.p99Ms)} ms, errors ${r.errors}`);
      }
    }
    // Draws per 1,000 tunnels: a burst of concurrent tunnels through Rotor, both listeners.
    const before = await draws(rotor.admin);
    let tunnels = 0;
    for (const name of ['rotor connect', 'rotor socks5']) {
      const r = await runJob<RateResult>(client, {
        op: 'rate',
        proxy: specs[name]!,
        target: target.info.port,
        concurrency: 32,
        durationMs: options.burstMs,
      });
      tunnels += r.completed;
    }
    const made = (await draws(rotor.admin)) - before;
    client.disconnect();
    const p = (name: string, k: 'p50' | 'p99') => median(samples.get(name)![k]);
    const rows = [
      [
        'CONNECT (squid)',
        p('direct connect', 'p50'),
        p('rotor connect', 'p50'),
        p('direct connect', 'p99'),
        p('rotor connect', 'p99'),
        0.75,
      ],
      [
        'SOCKS5 with auth (microsocks)',
        p('direct socks5', 'p50'),
        p('rotor socks5', 'p50'),
        p('direct socks5', 'p99'),
        p('rotor socks5', 'p99'),
        0.5,
      ],
    ] as const;
    const lines = [
      `Upstream ${rttMs} ms away (bench/delay-relay.ts), fresh tunnel + one 64-byte GET, sequential, ${count} per sample, ${reps} interleaved repetitions, medians:`,
      '',
      '| tunnel | direct p50 ms | rotor p50 ms | rotor/direct p50 | target | met | direct p99 ms | rotor p99 ms |',
      '| --- | ---: | ---: | ---: | --- | --- | ---: | ---: |',
      ...rows.map(
        ([name, d50, r50, d99, r99, goal]) =>
          `| ${name} | ${fmt(d50)} | ${fmt(r50)} | ${fmt(r50 / d50)} | <= ${goal} | ${r50 / d50 <= goal ? 'yes' : 'NO'} | ${fmt(d99)} | ${fmt(r99)} |`,
      ),
      '',
      `DrawByPwd per 1,000 tunnels through Rotor: ${fmt((made * 1000) / Math.max(1, tunnels))} (${made} draws for ${tunnels} tunnels in a ${options.burstMs / 1000} s burst per listener at 32 concurrent; target <= 1).`,
    ];
    return lines.join('\n');
  } finally {
    for (const p of procs.reverse()) await p.stop().catch(() => undefined);
  }
}
