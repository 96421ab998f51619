// A fleet daemon's flush at a reseller's size: what one flush of accounting costs the daemon (its event loop
// is also proxying) with N users on Redis, while a few of them carry traffic here and on another daemon.
// A real redis-server started here; two daemons' accounting (Accounting + AllowanceLeaser on a RedisStore),
// `here` with every user, `other` with the active ones only. Per round: `active` users move bytes on each
// daemon, `other` flushes and syncs, then `here` flushes (timed: wall, CPU of this process, writes to its
// Redis socket ≈ round trips, Redis commands from INFO commandstats). At the end every active user's usage on
// `here` must be the sum of both daemons' bytes (what readFleet delivers stays exact).
//
//   node --import tsx bench/users-flush.ts [--users 100000] [--active 100] [--rounds 10]
import { parseArgs } from 'node:util';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { Accounting, type AccountingUser } from '../src/accounting/accounting.ts';
import { AllowanceLeaser } from '../src/fleet/allowance.ts';
import { RedisAllowance } from '../src/store/redis-fleet-allowance.ts';
import { openRedisStore, type RedisStore } from '../src/store/index.ts';
import { RedisServer, redisMissing } from '../test/fleet/redis-server.ts';

const { values } = parseArgs({
  options: {
    users: { type: 'string', default: '100000' },
    active: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '10' },
  },
});
const N = Number(values.users);
const ACTIVE = Number(values.active);
const ROUNDS = Number(values.rounds);
if (redisMissing) throw new Error(redisMissing);
const GiB = 1024 ** 3;
const prefix = 'flush:';

const redis = await new RedisServer().start();
const admin = new Redis(redis.port, '127.0.0.1');

async function commands(): Promise<number> {
  const info = await admin.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)) if (m[1] !== 'info') n += Number(m[2]);
  return n;
}

interface Daemon {
  store: RedisStore;
  leaser: AllowanceLeaser;
  accounting: Accounting;
}

async function daemon(instance: string, users: AccountingUser[]): Promise<Daemon> {
  const store = await openRedisStore(redis.url, { prefix, commandTimeoutMs: 30_000 });
  // No timer: the flushes measured are the ones called here, and each round's syncs are called here too.
  const leaser = new AllowanceLeaser(new RedisAllowance(store.connection, prefix), {
    instance,
    sliceBytes: 64 * 1024 * 1024,
    syncEveryMs: 3_600_000,
  });
  const accounting = new Accounting({ store, allowance: leaser, flushIntervalMs: 3_600_000 });
  await accounting.start([]);
  await accounting.upsertUsers(users);
  return { store, leaser, accounting };
}

const users: AccountingUser[] = Array.from({ length: N }, (_, i) => ({ name: `u${String(i).padStart(6, '0')}`, limitBytes: 100 * GiB }));
const seedStore = await openRedisStore(redis.url, { prefix, commandTimeoutMs: 30_000 });
for (let from = 0; from < N; from += 5000)
  await seedStore.setLimits(users.slice(from, from + 5000).map((u) => ({ user: u.name, limitBytes: u.limitBytes })));
await seedStore.close();

let t = Date.now();
const here = await daemon('here', users);
console.log(`${N} users started on 'here' in ${((Date.now() - t) / 1000).toFixed(1)} s`);
const stride = Math.max(1, Math.floor(N / ACTIVE));
const active = users.filter((_, i) => i % stride === 0).slice(0, ACTIVE);
const other = await daemon('other', active);
// Settle: the first flushes after a start read what the start left.
await here.accounting.flush();
await here.accounting.flush();

// Round trips: writes to the daemon's Redis socket (a pipeline or MULTI is one write, each command alone one).
let writes = 0;
const stream = (here.store.connection.client as unknown as { stream: { write: (...a: unknown[]) => boolean } }).stream;
const write = stream.write.bind(stream);
stream.write = (...a: unknown[]) => {
  writes++;
  return write(...a);
};

const expected = new Map<string, number>(active.map((u) => [u.name, here.accounting.get(u.name)!.usedBytes]));
const rows: { wall: number; cpu: number; writes: number; commands: number }[] = [];
for (let r = 0; r < ROUNDS; r++) {
  for (const [i, u] of active.entries()) {
    const a = 1000 + r * 10 + i;
    const b = 2000 + r * 10 + i;
    here.accounting.meter(u.name).add(a, 0);
    other.accounting.meter(u.name).add(0, b);
    expected.set(u.name, (expected.get(u.name) ?? 0) + a + b);
  }
  await other.accounting.flush();
  await other.leaser.syncAll();
  await here.leaser.syncAll();
  const c0 = await commands();
  writes = 0;
  const cpu0 = process.cpuUsage();
  t = performance.now();
  await here.accounting.flush();
  const wall = performance.now() - t;
  const cpu = process.cpuUsage(cpu0);
  const w = writes;
  rows.push({ wall, cpu: (cpu.user + cpu.system) / 1000, writes: w, commands: (await commands()) - c0 });
}
await other.leaser.syncAll();
await here.accounting.flush();
let wrong = 0;
for (const u of active) if (here.accounting.get(u.name)!.usedBytes !== expected.get(u.name)) wrong++;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
console.log(
  JSON.stringify({
    users: N,
    active: ACTIVE,
    rounds: ROUNDS,
    flushWallMs: Number(median(rows.map((x) => x.wall)).toFixed(1)),
    flushCpuMs: Number(median(rows.map((x) => x.cpu)).toFixed(1)),
    roundTrips: median(rows.map((x) => x.writes)),
    redisCommands: median(rows.map((x) => x.commands)),
    wrongUsage: wrong,
    load: loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
  }),
);

for (const d of [other, here]) {
  await d.accounting.close();
  await d.leaser.close();
  await d.store.close();
}
admin.disconnect();
await redis.stop();
