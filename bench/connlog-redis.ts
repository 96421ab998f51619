// What the Redis connection log's append costs per record, A/B between checkouts (paired, interleaved rounds in one
// process, one redis-server of its own): Redis's main-thread CPU (INFO cpu, load-independent next to wall time),
// this process's CPU around the appends (building the script's arguments, ioredis), and the memory of the log's keys
// (MEMORY USAGE) with the per-user index's share. Records are shaped like an M2 tunnel's, `--users` users in
// turn, appended in batches of 500 with their rollups folded, as the recorder hands them over. With `--pass`, also
// the one-time pass that indexes a store written by the first checkout (no per-user index), run by the last one.
//
//   node --import tsx bench/connlog-redis.ts --roots /tmp/a,/tmp/b [--records 50000] [--users 200] [--rounds 4]
//     [--max-records 1000000] [--pass 200000]
// (each root a checkout with node_modules, e.g. `git worktree add --detach /tmp/a <rev>`; `.` for this one)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';

const { values } = parseArgs({
  options: {
    roots: { type: 'string', default: '.' },
    records: { type: 'string', default: '50000' },
    users: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '4' },
    'max-records': { type: 'string', default: '1000000' },
    pass: { type: 'string', default: '0' },
  },
});
const ROOTS = values.roots.split(',').map((r) => resolve(r));
const N = Number(values.records);
const USERS = Number(values.users);
const MAX = Number(values['max-records']);

interface LogStore {
  append(records: unknown[], usage?: unknown[], batchId?: string): Promise<number>;
  indexPass?(): Promise<void>;
}
interface Opened {
  connectionLog(bounds?: { maxRecords?: number }): LogStore;
  close(): Promise<void>;
}
type Open = (url: string, options: { prefix: string; commandTimeoutMs: number }) => Promise<Opened>;
type Fold = (records: unknown[]) => unknown[];

async function freePort(): Promise<number> {
  return new Promise((ok) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
}

const port = await freePort();
const dir = mkdtempSync(join(tmpdir(), 'connlog-redis-bench-'));
const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
  stdio: 'ignore',
});
const url = `redis://127.0.0.1:${port}`;
const redis = new Redis(url, { lazyConnect: true });
redis.on('error', () => undefined); // while redis-server starts
for (let i = 0; ; i++) {
  try {
    await redis.connect();
    break;
  } catch {
    if (i > 50) throw new Error('redis-server did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const cpuMs = async (): Promise<number> => {
  const info = await redis.info('cpu');
  const user = Number(/used_cpu_user_main_thread:([\d.]+)/.exec(info)?.[1]);
  const sys = Number(/used_cpu_sys_main_thread:([\d.]+)/.exec(info)?.[1]);
  return (user + sys) * 1000;
};

async function memory(pattern: string): Promise<number> {
  let total = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    for (const k of keys) total += Number(await redis.memory('USAGE', k, 'SAMPLES', 0));
  } while (cursor !== '0');
  return total;
}

function batch(from: number, t0: number): unknown[] {
  const out = [];
  for (let n = from; n < from + 500; n++)
    out.push({
      id: `p${n.toString(36)}`,
      user: `user${n % USERS}`,
      session: null,
      listener: 'socks5',
      client: '127.0.0.1',
      target: '127.0.0.1:41234',
      node: 'socks5://up@127.0.0.1:41001',
      bytesUp: 120,
      bytesDown: 2048,
      startedAt: t0 + n,
      durationMs: 1,
      result: 'ok',
      reason: 'closed',
      retries: 0,
      hedges: 0,
    });
  return out;
}

const modules = new Map<string, { open: Open; fold: Fold }>();
for (const root of ROOTS) {
  const store = (await import(join(root, 'src/store/index.ts'))) as { openBackends: Open };
  const rollup = (await import(join(root, 'src/store/connection-log-rollup.ts'))) as { foldRollups: Fold };
  modules.set(root, { open: store.openBackends, fold: rollup.foldRollups });
}

console.log(
  `# records ${N}, users ${USERS}, maxRecords ${MAX}, load ${(await import('node:os'))
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
for (let round = 0; round < Number(values.rounds); round++) {
  for (const root of ROOTS) {
    const { open, fold } = modules.get(root)!;
    const prefix = `r${round}:`;
    const backends = await open(url, { prefix, commandTimeoutMs: 30_000 });
    const log = backends.connectionLog({ maxRecords: MAX });
    const t0 = Date.now() - 3_600_000;
    const c0 = await cpuMs();
    let own = 0;
    for (let i = 0; i < N; i += 500) {
      const records = batch(i, t0);
      const u0 = process.cpuUsage();
      await log.append(records, fold(records), `b${i}`);
      const u = process.cpuUsage(u0);
      own += u.user + u.system;
    }
    const redisUs = ((await cpuMs()) - c0) * 1000;
    const all = await memory(`${prefix}*`);
    const byUser = await memory(`${prefix}connlog:idx:u:*`);
    const held = Math.min(N, MAX);
    console.log(
      JSON.stringify({
        root,
        round,
        redisCpuUsPerRecord: +(redisUs / N).toFixed(2),
        daemonCpuUsPerRecord: +(own / N).toFixed(2),
        memoryBytesPerRecordHeld: Math.round(all / held),
        indexBytesPerRecordHeld: Math.round(byUser / held),
      }),
    );
    await redis.flushall();
    await backends.close();
  }
}

const PASS = Number(values.pass);
if (PASS > 0) {
  const older = modules.get(ROOTS[0]!)!;
  const newer = modules.get(ROOTS[ROOTS.length - 1]!)!;
  const prefix = 'pass:';
  const a = await older.open(url, { prefix, commandTimeoutMs: 30_000 });
  const writer = a.connectionLog({ maxRecords: PASS });
  const t0 = Date.now() - 3_600_000;
  for (let i = 0; i < PASS; i += 500) await writer.append(batch(i, t0), []);
  await a.close();
  await redis.call('CONFIG', 'RESETSTAT');
  const b = await newer.open(url, { prefix, commandTimeoutMs: 30_000 });
  const log = b.connectionLog({ maxRecords: PASS });
  const c0 = await cpuMs();
  const w0 = performance.now();
  await log.indexPass?.();
  const wallMs = Math.round(performance.now() - w0);
  const redisMs = Math.round((await cpuMs()) - c0);
  const stats = /cmdstat_evalsha:calls=(\d+)/.exec(await redis.info('commandstats'));
  console.log(
    JSON.stringify({
      pass: PASS,
      steps: Number(stats?.[1] ?? 0),
      redisCpuMs: redisMs,
      wallMs,
      redisCpuMsPerStep: +(redisMs / Number(stats?.[1] ?? 1)).toFixed(2),
    }),
  );
  await b.close();
}

redis.disconnect();
server.kill('SIGTERM');
await new Promise((r) => server.once('exit', r));
rmSync(dir, { recursive: true, force: true });
