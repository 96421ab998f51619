// `npm run bench:idle-tunnels`: 9,000 idle tunnels held by the daemon as users run it, within 256 MiB of RSS,
// with new tunnels opened meanwhile at p99 ≤ 10 ms (issue 24). Three processes besides the bench itself, so
// each has its own descriptor limit (`ulimit -n`; each tunnel is 2 descriptors in the daemon):
//   upstream  bench/idle-upstream.ts: a SOCKS5 upstream that is its own target (one socket per tunnel),
//             handed out by the embedded sandbox as the drawn line of the user's product;
//   daemon    `rotor start` as `npm start` runs it (bench/daemon.ts), config: one user, the embedded sandbox;
//   client    bench/client.ts (forked): opens the tunnels (half HTTP CONNECT, half SOCKS5) and keeps them idle,
//             times new tunnels (connect, handshake, one request, close; one after another), then sends one
//             request on every held tunnel (all must answer).
// Phases: warm-up (probe tunnels of both kinds), `before` (RSS, new-tunnel latency with nothing held), hold the
// tunnels, `held` (RSS once settled, new-tunnel latency), use every held tunnel.
//
//   npm run bench:idle-tunnels -- [--tunnels 9000] [--probes 500] [--concurrency 64] [--heap FILE]
//
// --heap FILE: the daemon runs with --heapsnapshot-signal=SIGUSR2 and a heap snapshot is taken while the tunnels
// are held (written in the daemon's directory, then moved to FILE): what each tunnel keeps alive.
// Builds dist/ first when it is older than src/.
import { fork, type ChildProcess } from 'node:child_process';
import { readdirSync, renameSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { ClientJob, ClientReply, HoldResult, LatencyResult, ProxySpec, UseResult } from './client.ts';
import { ensureBuilt, npmStartCommand, spawnRotor, SOCKS_PRODUCT, type Daemon } from './daemon.ts';
import { readRss } from './idle-rss.ts';
import { BenchSetupError, startJsonChild, type Proc } from './procs.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const USER = 'idle';
const PASSWORD = 'idle-tunnels-pw';

const log = (line: string): void => void process.stdout.write(`${line}\n`);
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

/** The load client in a process of its own (bench/client.ts), one job at a time over IPC. */
class Client {
  private constructor(private readonly child: ChildProcess) {}

  static start(): Promise<Client> {
    return new Promise((ok, fail) => {
      const child = fork(join(HERE, 'client.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      child.once('exit', (code) => fail(new BenchSetupError(`load client exited early (${code})`)));
      child.once('message', () => {
        child.removeAllListeners('exit');
        ok(new Client(child));
      });
    });
  }

  run<T>(job: ClientJob): Promise<T> {
    return new Promise((ok, fail) => {
      const onExit = (): void => fail(new BenchSetupError('load client died'));
      this.child.once('exit', onExit);
      this.child.once('message', (reply: ClientReply) => {
        this.child.off('exit', onExit);
        if (reply.ok) ok(reply.result as T);
        else fail(new BenchSetupError(`client ${job.op}: ${reply.error}`));
      });
      this.child.send(job);
    });
  }

  stop(): void {
    this.child.disconnect();
  }
}

function configFor(dir: string, upstreamPort: number): Record<string, unknown> {
  return {
    platform: { mode: 'embedded', sandbox: { drawnLines: { [SOCKS_PRODUCT]: [`socks5://up:up-pass@127.0.0.1:${upstreamPort}`] } } },
    proxy: { http: { host: '127.0.0.1', port: 0 }, socks5: { host: '127.0.0.1', port: 0 } },
    admin: { host: '127.0.0.1', port: 0 },
    callback: { host: '127.0.0.1', port: 0 },
    store: { path: join(dir, 'rotor.db') },
    log: { level: 'info' },
    users: [{ name: USER, password: PASSWORD, mainAccount: 'bench', product: SOCKS_PRODUCT, draw: 'pwd', sessTime: 5, limitBytes: -1 }],
    pool: { lowWater: 1, drawBatch: 1 },
  };
}

async function heapSnapshot(daemon: Daemon, dir: string, to: string): Promise<void> {
  const before = new Set(readdirSync(dir));
  process.kill(daemon.pid, 'SIGUSR2');
  const started = Date.now();
  for (;;) {
    const made = readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    // Written once the daemon answers again (the snapshot blocks its event loop).
    if (
      made &&
      (await fetch(`http://127.0.0.1:${daemon.admin}/healthz`)
        .then((r) => r.ok)
        .catch(() => false))
    ) {
      renameSync(join(dir, made), to);
      return;
    }
    if (Date.now() - started > 120_000) throw new BenchSetupError('no heap snapshot within 120 s');
    await new Promise((r) => setTimeout(r, 500));
  }
}

const fmtLatency = (r: LatencyResult): string =>
  `p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms (${r.count} tunnels, ${r.errors} errors)`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tunnels: { type: 'string', default: '9000' },
      probes: { type: 'string', default: '500' },
      concurrency: { type: 'string', default: '64' },
      heap: { type: 'string' },
    },
  });
  const tunnels = Number(values.tunnels);
  const probes = Number(values.probes);
  const concurrency = Number(values.concurrency);
  ensureBuilt(log);
  const upstream = await startJsonChild<{ pid: number; port: number }>(process.execPath, [
    '--import',
    'tsx',
    join(HERE, 'idle-upstream.ts'),
    '--serve',
  ]);
  const { env, nodeFlags } = npmStartCommand();
  const heapFlags = values.heap ? ['--heapsnapshot-signal=SIGUSR2'] : [];
  let daemonDir = '';
  let daemon: Daemon | undefined;
  let client: Client | undefined;
  const procs: Proc[] = [upstream.proc];
  try {
    daemon = await spawnRotor(
      (dir) => {
        daemonDir = dir;
        return configFor(dir, upstream.info.port);
      },
      [...nodeFlags, ...heapFlags],
      60_000,
      env,
    );
    client = await Client.start();
    const port = upstream.info.port;
    const connect: ProxySpec = { kind: 'connect', port: daemon.http, username: USER, password: PASSWORD };
    const socks5: ProxySpec = { kind: 'socks5', port: daemon.socks5, username: USER, password: PASSWORD };
    log(`bench:idle-tunnels: ${tunnels} tunnels (half CONNECT, half SOCKS5), ${probes} probes; load ${load()}`);

    // Warm-up: the pool drawn, the login cached, both paths' code compiled.
    for (const proxy of [connect, socks5]) await client.run<LatencyResult>({ op: 'latency', proxy, target: port, count: 200 });
    const probe = async (): Promise<{ connect: LatencyResult; socks5: LatencyResult }> => ({
      connect: await client!.run<LatencyResult>({ op: 'latency', proxy: connect, target: port, count: probes / 2 }),
      socks5: await client!.run<LatencyResult>({ op: 'latency', proxy: socks5, target: port, count: probes / 2 }),
    });
    await new Promise((r) => setTimeout(r, 2000));
    const rssBefore = readRss(daemon.pid);
    const before = await probe();
    log(
      `before: RSS ${rssBefore.rss.toFixed(1)} MiB; new tunnels CONNECT ${fmtLatency(before.connect)}; SOCKS5 ${fmtLatency(before.socks5)}`,
    );

    const holdStarted = performance.now();
    const heldConnect = await client.run<HoldResult>({ op: 'hold', proxy: connect, target: port, count: tunnels / 2, concurrency });
    const heldAll = await client.run<HoldResult>({ op: 'hold', proxy: socks5, target: port, count: tunnels / 2, concurrency });
    const holdSeconds = (performance.now() - holdStarted) / 1000;
    log(
      `held ${heldAll.held} tunnels in ${holdSeconds.toFixed(1)} s (${heldConnect.errors + heldAll.errors} failed to open); load ${load()}`,
    );
    await new Promise((r) => setTimeout(r, 5000));
    const rssHeld = readRss(daemon.pid);
    const during = await probe();
    const rssAfterProbes = readRss(daemon.pid);
    log(
      `held: RSS ${rssHeld.rss.toFixed(1)} MiB (anon ${rssHeld.anon.toFixed(1)}), ${rssAfterProbes.rss.toFixed(1)} MiB after the probes; ` +
        `new tunnels CONNECT ${fmtLatency(during.connect)}; SOCKS5 ${fmtLatency(during.socks5)}`,
    );
    if (values.heap) {
      await heapSnapshot(daemon, daemonDir, resolve(values.heap));
      log(`heap snapshot: ${resolve(values.heap)}`);
    }
    const used = await client.run<UseResult>({ op: 'use', concurrency });
    log(`every held tunnel used once: ${used.ok} answered, ${used.failed} failed`);

    const rss = Math.max(rssHeld.rss, rssAfterProbes.rss);
    const p99 = Math.max(during.connect.p99Ms, during.socks5.p99Ms);
    const perTunnel = ((rssHeld.rss - rssBefore.rss) * 1024) / Math.max(1, heldAll.held);
    log('');
    log(`| figure | value | target | met |`);
    log(`|---|---|---|---|`);
    log(
      `| daemon RSS with ${heldAll.held} idle tunnels | ${rss.toFixed(1)} MiB (${rssBefore.rss.toFixed(1)} before) | ≤ 256 MiB | ${rss <= 256 ? 'yes' : 'no'} |`,
    );
    log(`| RSS per idle tunnel | ${perTunnel.toFixed(2)} KiB | | |`);
    log(
      `| new tunnels p99 while held (CONNECT / SOCKS5) | ${during.connect.p99Ms.toFixed(2)} / ${during.socks5.p99Ms.toFixed(2)} ms ` +
        `(before: ${before.connect.p99Ms.toFixed(2)} / ${before.socks5.p99Ms.toFixed(2)}) | ≤ 10 ms | ${p99 <= 10 ? 'yes' : 'no'} |`,
    );
    log(`| held tunnels that answered afterwards | ${used.ok} of ${tunnels} | all | ${used.ok === tunnels ? 'yes' : 'no'} |`);
    log(`load ${load()}`);
  } finally {
    client?.stop();
    await daemon?.stop();
    for (const p of procs) await p.stop();
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
