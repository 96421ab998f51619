// What 10,000 users cost Rotor in V8 heap (issue 15): users written to a SQLite store (one scrypt hash for
// all), then loaded by the real users directory and accounting, as a daemon does at start. The heap is
// read after forced GCs, before and after the load; the daemon's own /metrics shows the same for a live
// process (bench/users-scale.ts), where the embedded sandbox's state for the users' sub accounts adds to it.
//
//   node --expose-gc --import tsx bench/users-heap.ts [--users 10000]
import { parseArgs } from 'node:util';
import { Accounting } from '../src/accounting/accounting.ts';
import { SqliteStore } from '../src/store/sqlite.ts';
import { Users } from '../src/users/directory.ts';
import { hashPasswordAsync } from '../src/admission/password.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const { values } = parseArgs({ options: { users: { type: 'string', default: '10000' } } });
const count = Number(values.users);
const store = new SqliteStore(':memory:');
const hash = await hashPasswordAsync('users-heap-password');
const periods = ['month', 'day', 'total'] as const;
for (let i = 0; i < count; i++) {
  const name = `u${String(i).padStart(5, '0')}`;
  await store.putUser({
    name,
    data: {
      name,
      mainAccount: 'bench',
      product: 'DYN-105-FLOW',
      source: 'api',
      createdAt: Date.now(),
      quota: { bytes: 10 * 1024 ** 3, period: periods[i % 3] },
    },
    passwordHash: hash,
    state: 'ready',
  });
}
gc();
gc();
const before = process.memoryUsage().heapUsed;
const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
await accounting.start([]);
const users = new Users({ store, accounting, platform: { ensure: async () => undefined }, sweepMs: 3_600_000 });
await users.start([]);
gc();
gc();
const after = process.memoryUsage().heapUsed;
process.stdout.write(
  `${count} users in the directory and accounting: ${((after - before) / 1024 ** 2).toFixed(1)} MiB of V8 heap, ${Math.round((after - before) / count)} B per user\n`,
);
await users.close();
await accounting.close();
await store.close();
