// Run by test/pool/field-layout.test.ts: node --allow-natives-syntax --import tsx field-layout-child.ts. Prints
// (V8's %DebugPrint, on stdout) a pool's node entry right after its draw (@@BEFORE) and again after every rare
// write an entry sees in service (@@AFTER): the node drawn again, failures and cooling, a probe started,
// failed, passed and abandoned.
import { setFlagsFromString } from 'node:v8';
import { Pool } from '../../src/pool/pool.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';

setFlagsFromString('--allow-natives-syntax');
const print = new Function('o', '%DebugPrint(o)') as (o: unknown) => void;
const T = 1_764_000_000_000;
const node: UpstreamNode = { id: 'socks5://u@127.0.0.1:21003', protocol: 'socks5', host: '127.0.0.1', port: 21003, source: 'pwd' };
const pool = new Pool({
  key: { user: 'u', productNo: 'P1', region: '' },
  drawer: { draw: () => Promise.resolve([{ ...node }]) },
  lowWater: 0,
  probation: true,
  now: () => T,
});
const entry = (): unknown => (pool as unknown as { entries: unknown[] }).entries[0];
await pool.prefill();
process.stdout.write('@@BEFORE\n');
print(entry());
await pool.prefill();
const n = pool.acquireNow()!;
pool.reportFailure(n, 'refused');
pool.reportFailure(n, 'refused');
pool.probeStarted(n);
pool.recordProbe(n, { at: T + 0.5, ok: false, latencyMs: 3, reason: 'refused' });
pool.probeStarted(n);
pool.recordProbe(n, { at: T + 1.5, ok: true, latencyMs: 3 });
pool.probeStarted(n);
pool.probeAbandoned(n);
pool.release(n);
process.stdout.write('\n@@AFTER\n');
print(entry());
process.stdout.write('\n@@END\n');
