// `npm run bench:connlog`: what the connection log costs (issue 16).
//
//   --tunnels (default)  M2 new tunnels per second through two gateways in the same run — records off and
//                        records on (batched to SQLite) — over the same microsocks / tinyproxy upstreams, the
//                        repetitions interleaved with the order flipping; reports the medians and on/off.
//   --query N            fills a SQLite connection log with N records (default 1,000,000) and times the
//                        filtered queries of GET /v1/connections (bench/connlog-query.ts).
//
//   npm run bench:connlog [-- --reps 5] [--ms 3000] [--concurrency 32]
//   npm run bench:connlog -- --query 1000000
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { ClientJob, ClientReply, LatencyResult, ProxySpec, RateResult } from './client.ts';
import { fillConnectionLog, timeQueries } from './connlog-query.ts';
import { cpuMs, startJsonChild, startMicrosocks, startTinyproxy, type Proc } from './procs.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER, type GatewaySpec } from './spec.ts';
import { fmt, median } from './stats.ts';
import { SqliteStore } from '../src/store/sqlite.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const UP_USER = 'upuser';
const UP_PASS = 'up-pass';
type Variant = 'off' | 'store';
type Proto = 'connect' | 'socks5';

const log = (text: string): void => void process.stderr.write(`${text}\n`);

/** The load client (bench/client.ts) in its own process, one job at a time. */
function startClient(): Promise<{ run<T>(job: ClientJob): Promise<T>; stop(): void }> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = fork(join(HERE, 'client.ts'), [], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child.once('error', reject);
    child.once('message', () =>
      resolve({
        run: <T>(job: ClientJob) =>
          new Promise<T>((ok, fail) => {
            child.once('message', (reply: ClientReply) =>
              reply.ok ? ok(reply.result as T) : fail(new Error(`client ${job.op}: ${reply.error}`)),
            );
            child.send(job);
          }),
        stop: () => child.disconnect(),
      }),
    );
  });
}

async function tunnels(reps: number, ms: number, concurrency: number): Promise<void> {
  const procs: Proc[] = [];
  try {
    const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
    procs.push(target.proc);
    const socks = await startMicrosocks(UP_USER, UP_PASS);
    procs.push(socks);
    const tiny = await startTinyproxy(UP_USER, UP_PASS, 400);
    procs.push(tiny);
    const gateways = {} as Record<Variant, { http: number; socks5: number; pid: number }>;
    for (const records of ['off', 'store'] as const) {
      const spec: GatewaySpec = {
        socks5: { port: socks.port, username: socks.username, password: socks.password },
        http: { port: tiny.port, username: tiny.username, password: tiny.password },
        records,
      };
      const g = await startJsonChild<{ http: number; socks5: number; pid: number }>(process.execPath, [
        '--import',
        'tsx',
        join(HERE, 'gateway.ts'),
        JSON.stringify(spec),
      ]);
      procs.push(g.proc);
      gateways[records] = g.info;
    }
    const client = await startClient();
    const proxy = (v: Variant, proto: Proto): ProxySpec =>
      proto === 'connect'
        ? { kind: 'connect', port: gateways[v].http, username: HTTP_USER, password: BENCH_PASSWORD }
        : { kind: 'socks5', port: gateways[v].socks5, username: SOCKS_USER, password: BENCH_PASSWORD };
    for (const v of ['off', 'store'] as const)
      for (const proto of ['connect', 'socks5'] as const)
        await client.run<LatencyResult>({ op: 'latency', proxy: proxy(v, proto), target: target.info.port, count: 100 });
    const samples = new Map<string, number[]>();
    for (let rep = 0; rep < reps; rep++) {
      const order: Variant[] = rep % 2 === 0 ? ['off', 'store'] : ['store', 'off'];
      for (const proto of ['connect', 'socks5'] as const) {
        for (const v of order) {
          const cpuBefore = cpuMs(gateways[v].pid);
          const r = await client.run<RateResult>({
            op: 'rate',
            proxy: proxy(v, proto),
            target: target.info.port,
            concurrency,
            durationMs: ms,
          });
          // The gateway's own CPU per tunnel: steadier than tunnels/s on a machine shared with other work.
          const perTunnel = (cpuMs(gateways[v].pid) - cpuBefore) / Math.max(1, r.completed);
          const key = `${proto} ${v}`;
          samples.set(key, [...(samples.get(key) ?? []), r.perSecond]);
          samples.set(`${key} cpu`, [...(samples.get(`${key} cpu`) ?? []), perTunnel]);
          log(
            `rep ${rep + 1} ${proto} records ${v}: ${fmt(r.perSecond)} tunnels/s, ${perTunnel.toFixed(3)} gateway CPU ms/tunnel (${r.errors} errors)`,
          );
        }
      }
    }
    client.stop();
    const rows = (['connect', 'socks5'] as const).map((proto) => {
      const off = median(samples.get(`${proto} off`)!);
      const on = median(samples.get(`${proto} store`)!);
      const cpuOff = median(samples.get(`${proto} off cpu`)!);
      const cpuOn = median(samples.get(`${proto} store cpu`)!);
      return { proto, off, on, ratio: on / off, cpuOff, cpuOn, cpuRatio: cpuOn / cpuOff };
    });
    process.stdout.write(`M2 new tunnels/s, ${concurrency} concurrent, ${ms} ms x ${reps} reps (median)\n`);
    process.stdout.write(
      '| proto | tunnels/s off | tunnels/s on (SQLite) | on/off | gateway CPU ms/tunnel off | on | on/off |\n|---|---|---|---|---|---|---|\n',
    );
    for (const r of rows)
      process.stdout.write(
        `| ${r.proto} | ${fmt(r.off)} | ${fmt(r.on)} | ${r.ratio.toFixed(3)} | ${r.cpuOff.toFixed(3)} | ${r.cpuOn.toFixed(3)} | ${r.cpuRatio.toFixed(3)} |\n`,
      );
    process.stdout.write(`${JSON.stringify({ m2: rows })}\n`);
  } finally {
    for (const p of procs.reverse()) await p.stop();
  }
}

async function query(count: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-connlog-bench-'));
  const store = new SqliteStore(join(dir, 'rotor.db'));
  try {
    const end = Date.now();
    const t = Date.now();
    const connlog = await fillConnectionLog(store, count, end);
    log(`filled ${count} records in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    const timings = await timeQueries(connlog, end, 5);
    process.stdout.write(`GET /v1/connections over ${count} records (SQLite, slowest of 5, first page + next page)\n`);
    process.stdout.write('| query | ms | items |\n|---|---|---|\n');
    for (const q of timings) process.stdout.write(`| ${q.name} | ${q.ms.toFixed(1)} | ${q.items} |\n`);
    process.stdout.write(`${JSON.stringify({ records: count, queries: timings })}\n`);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const { values } = parseArgs({
  options: {
    query: { type: 'string' },
    tunnels: { type: 'boolean' },
    reps: { type: 'string', default: '5' },
    ms: { type: 'string', default: '3000' },
    concurrency: { type: 'string', default: '32' },
  },
});
if (values.query !== undefined) await query(Number(values.query) || 1_000_000);
else await tunnels(Number(values.reps), Number(values.ms), Number(values.concurrency));
