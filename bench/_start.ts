import { Accounting } from '../src/accounting/accounting.ts';
import { SqliteStore } from '../src/store/sqlite.ts';
import { Users } from '../src/users/directory.ts';
const store = new SqliteStore('/tmp/scale-start.db');
const N = 100_000;
if ((await store.listUsers()).length < N) {
  for (let i = 0; i < N; i++) {
    const name = `u${String(i).padStart(6, '0')}`;
    await store.putUser({
      name,
      data: { name, mainAccount: 'bench', source: 'api', createdAt: 1, quota: { bytes: 1e10, period: ['month', 'day', 'total'][i % 3] } },
      passwordHash: 'sha256$x',
      state: 'ready',
    });
  }
}
let t = performance.now();
const ch = await store.usersChangedSince(0);
console.log('load', (performance.now() - t).toFixed(0), ch.changed.length);
t = performance.now();
const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
await accounting.start([]);
const users = new Users({ store, accounting, platform: { ensure: async () => undefined }, sweepMs: 3_600_000 });
await users.start([]);
console.log('start', (performance.now() - t).toFixed(0), process.memoryUsage().rss / 2 ** 20);
await users.close();
await accounting.close();
