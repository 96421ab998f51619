// Child process for the crash test: counts traffic with a real store, lets the timer flush, counts more, says
// "ready" and waits to be killed with SIGKILL (no close, no final flush).
import { SqliteStore } from '../../src/store/sqlite.ts';
import { Accounting } from '../../src/accounting/accounting.ts';

const [path, interval] = process.argv.slice(2);
const store = new SqliteStore(path!);
const accounting = new Accounting({ store, flushIntervalMs: Number(interval) });
await accounting.start([{ name: 'carol', limitBytes: -1 }]);
const meter = accounting.meter('carol');
meter.add(400, 600);
// Wait until the timer (not an explicit flush) has persisted the first 1000 bytes.
while (((await store.getUsage('carol'))?.usedBytes ?? 0) < 1000) await new Promise((r) => setTimeout(r, 5));
meter.add(200, 300);
process.stdout.write('ready\n');
setInterval(() => {}, 1000);
