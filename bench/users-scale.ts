// Users at scale (issue 15): does authentication stay O(1) and /metrics bounded with 10,000 users made
// through the admin API? `rotor start` runs as a child process (embedded sandbox, SQLite in a temp dir); the
// M2 load (new CONNECT tunnels per second, one small request each, 32 at a time: bench/client.ts `rate`)
// runs in its own process against a loopback target (bench/target.ts). Two daemons run side by side: one
// with the config user alone, one whose store holds 10,000 more users (`--prefill`, written to its store
// before it starts, all with one hash) plus any `--api N` users POSTed to /v1/users first (the whole
// creation path: hash, journal, sandbox sub account; timed). M2 rounds alternate between the two so the
// shared machine's load falls on both alike; medians compared. /metrics of the second is read at the end.
//
//   node --import tsx bench/users-scale.ts [--prefill 10000] [--api 0] [--rounds 5] [--seconds 5]
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { adminSend, cleanup, rawConfig, spawnDaemon, tempDir, writeConfigFile } from '../test/e2e/limits-harness.ts';
import type { ClientJob, ClientReply, RateResult } from './client.ts';
import { startJsonChild } from './procs.ts';
import { SqliteStore } from '../src/store/sqlite.ts';
import { hashPassword } from '../src/users/password.ts';

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

/** A daemon as a child process on its own SQLite store, `prefill` users written to the store before it starts. */
async function daemonWith(prefill: number, hash: string) {
  const dir = tempDir('rotor-users-scale-');
  const file = join(dir, 'rotor.yaml');
  if (prefill > 0) {
    const store = new SqliteStore(join(dir, 'rotor.db'));
    for (let i = 0; i < prefill; i++) {
      await store.putUser({ name: `p${i}`, data: { name: `p${i}`, mainAccount: 'shop1', source: 'api', createdAt: Date.now(), quota: { bytes: 1e9, period: 'month' } }, passwordHash: hash, state: 'ready' });
    }
    await store.close();
  }
  writeConfigFile(
    file,
    rawConfig(dir, [{ name: 'alice', password: 'alice-pass', mainAccount: 'shop1' }], {
      admin: { token: TOKEN },
      log: 'info',
      // Background polls stay out of the measured window.
      accounts: { balancePollMs: 3_600_000, limitSyncMs: 3_600_000, flushIntervalMs: 2000 },
    }) as Record<string, unknown>,
  );
  return spawnDaemon(file, join(dir, 'rotor.log'));
}

async function main(): Promise<void> {
  const apiUsers = flag('api', 0);
  const prefill = flag('prefill', 10_000);
  const rounds = flag('rounds', 5);
  const seconds = flag('seconds', 5);
  // One daemon with the config user alone, one with 10,000 more users: measured in alternation, so the
  // machine's load (shared) falls on both alike.
  const one = await daemonWith(0, '');
  const many = await daemonWith(prefill, hashPassword('prefilled-users-password'));
  const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
  const load = await client();
  const m2 = async (port: number): Promise<number> => {
    const r = await load.run({ op: 'rate', proxy: { kind: 'connect', port, username: 'alice', password: 'alice-pass' }, target: target.info.port, concurrency: 32, durationMs: seconds * 1000 });
    if (r.errors > 0) console.log(`  (${r.errors} failed tunnels)`);
    return r.perSecond;
  };
  try {
    if (apiUsers > 0) {
      const started = Date.now();
      let next = 0;
      let failed = 0;
      const worker = async (): Promise<void> => {
        while (next < apiUsers) {
          const n = next++;
          // The whole path: scrypt hash, the journal, the sandbox sub account and its limit.
          const r = await adminSend(many.ports.admin, 'POST', '/v1/users', { name: `u${n}`, password: `p${n}-secret`, mainAccount: 'shop1', quota: { bytes: 1e9, period: 'month' } }, TOKEN);
          if (r.status !== 201) {
            failed++;
            if (failed <= 3) console.log(`  POST u${n}: ${r.status} ${JSON.stringify(r.body)}`);
          }
          if (n % 1000 === 999) console.log(`  ${n + 1} users after ${((Date.now() - started) / 1000).toFixed(0)} s`);
        }
      };
      await Promise.all(Array.from({ length: 8 }, worker));
      console.log(`created ${apiUsers - failed} users through POST /v1/users in ${((Date.now() - started) / 1000).toFixed(1)} s (${failed} failed)`);
    }
    const count = (await adminSend<unknown[]>(many.ports.admin, 'GET', '/v1/users?limit=10000&prefix=', undefined, TOKEN)).body.length;
    console.log(`users in the second daemon: ${prefill + apiUsers + 1} (first page of GET /v1/users: ${count})`);
    await m2(one.ports.http); // warm-up: the pools draw their nodes
    await m2(many.ports.http);
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < rounds; i++) {
      a.push(await m2(one.ports.http));
      b.push(await m2(many.ports.http));
    }
    console.log(`M2 CONNECT, 1 user:        ${a.map((x) => x.toFixed(0)).join(', ')} tunnels/s (median ${median(a).toFixed(0)})`);
    console.log(`M2 CONNECT, ${prefill + apiUsers + 1} users: ${b.map((x) => x.toFixed(0)).join(', ')} tunnels/s (median ${median(b).toFixed(0)})`);
    console.log(`ratio (many / one): ${(median(b) / median(a)).toFixed(3)}`);

    const text = await (await fetch(`http://127.0.0.1:${many.ports.admin}/metrics`)).text();
    const samples = text.split('\n').filter((l) => l && !l.startsWith('#'));
    const perUser = samples.filter((l) => /\{[^}]*user="/.test(l));
    console.log(`/metrics: ${text.length} bytes, ${samples.length} samples, ${perUser.length} per-user series (bound: 4 × metrics.userSeriesMax = 400)`);
  } finally {
    load.stop();
    await target.proc.stop();
    await Promise.all([one.stop(), many.stop()]);
    cleanup();
  }
}

await main();
