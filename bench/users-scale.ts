// Users at scale (issue 15): does authentication stay O(1) and /metrics bounded with 10,000 users made
// through the admin API? `rotor start` runs as a child process (embedded sandbox, SQLite in a temp dir); the
// M2 load (new CONNECT tunnels per second, one small request each, 32 at a time: bench/client.ts `rate`)
// runs in its own process against a loopback target (bench/target.ts). Rounds of M2 with the one config
// user alone, then 10,000 users are POSTed to /v1/users, then rounds again; medians compared. /metrics is
// read at the end: its size and its per-user series.
//
//   node --import tsx bench/users-scale.ts [--users 10000] [--rounds 3] [--seconds 5]
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { adminSend, cleanup, rawConfig, spawnDaemon, tempDir, writeConfigFile } from '../test/e2e/limits-harness.ts';
import type { ClientJob, ClientReply, RateResult } from './client.ts';
import { startJsonChild } from './procs.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const TOKEN = 'users-scale-token-91f0';

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

function client(): Promise<{ run: (job: ClientJob) => Promise<RateResult>; stop: () => void }> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = fork(join(HERE, 'client.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.once('error', reject);
    child.once('message', () =>
      resolve({
        run: (job) =>
          new Promise((res, rej) => {
            child.once('message', (reply: ClientReply) => (reply.ok ? res(reply.result as RateResult) : rej(new Error(reply.error))));
            child.send(job);
          }),
        stop: () => child.disconnect(),
      }),
    );
  });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const users = flag('users', 10_000);
  const rounds = flag('rounds', 3);
  const seconds = flag('seconds', 5);
  const dir = tempDir('rotor-users-scale-');
  const file = join(dir, 'rotor.yaml');
  writeConfigFile(
    file,
    rawConfig(dir, [{ name: 'alice', password: 'alice-pass', mainAccount: 'shop1' }], {
      admin: { token: TOKEN },
      log: 'info',
      // Background polls stay out of the measured window.
      accounts: { balancePollMs: 3_600_000, limitSyncMs: 3_600_000, flushIntervalMs: 2000 },
    }) as Record<string, unknown>,
  );
  const daemon = await spawnDaemon(file, join(dir, 'rotor.log'));
  const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
  const load = await client();
  const m2 = async (): Promise<number> => {
    const r = await load.run({ op: 'rate', proxy: { kind: 'connect', port: daemon.ports.http, username: 'alice', password: 'alice-pass' }, target: target.info.port, concurrency: 32, durationMs: seconds * 1000 });
    if (r.errors > 0) console.log(`  (${r.errors} failed tunnels)`);
    return r.perSecond;
  };
  try {
    await m2(); // warm-up: the pool draws its nodes
    const before: number[] = [];
    for (let i = 0; i < rounds; i++) before.push(await m2());
    console.log(`M2 with 1 user:        ${before.map((x) => x.toFixed(0)).join(', ')} tunnels/s (median ${median(before).toFixed(0)})`);

    const started = Date.now();
    let next = 0;
    let failed = 0;
    const worker = async (): Promise<void> => {
      while (next < users) {
        const n = next++;
        // The whole path: scrypt hash, the journal, the sandbox sub account and its limit.
        const r = await adminSend(daemon.ports.admin, 'POST', '/v1/users', { name: `u${n}`, password: `p${n}-secret`, mainAccount: 'shop1', quota: { bytes: 1e9, period: 'month' } }, TOKEN);
        if (r.status !== 201) {
          failed++;
          if (failed <= 3) console.log(`  POST u${n}: ${r.status} ${JSON.stringify(r.body)}`);
        }
        if (n % 1000 === 999) console.log(`  ${n + 1} users after ${((Date.now() - started) / 1000).toFixed(0)} s`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    console.log(`created ${users - failed} users through POST /v1/users in ${((Date.now() - started) / 1000).toFixed(1)} s (${failed} failed)`);

    const after: number[] = [];
    for (let i = 0; i < rounds; i++) after.push(await m2());
    console.log(`M2 with ${users + 1} users: ${after.map((x) => x.toFixed(0)).join(', ')} tunnels/s (median ${median(after).toFixed(0)})`);
    console.log(`ratio (many / one): ${(median(after) / median(before)).toFixed(3)}`);

    const text = await (await fetch(`http://127.0.0.1:${daemon.ports.admin}/metrics`)).text();
    const samples = text.split('\n').filter((l) => l && !l.startsWith('#'));
    const perUser = samples.filter((l) => /\{[^}]*user="/.test(l));
    console.log(`/metrics: ${text.length} bytes, ${samples.length} samples, ${perUser.length} per-user series (bound: 4 × metrics.userSeriesMax = 400)`);
  } finally {
    load.stop();
    await target.proc.stop();
    await daemon.stop();
    cleanup();
  }
}

await main();
