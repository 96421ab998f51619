// Child of live-list.test.ts, run with --max-semi-space-size=4 --expose-gc: connections opened and ended through
// a long-lived ConnectionLog (its own state moved to V8's old generation first, as a running daemon's is), 50
// open at a time, each holding about 4 KB through its record (its byte counters, as a forwarded request's
// exchange is). Prints what V8's young-generation collections kept per connection: a connection that ended
// before a collection should cost it nothing.
import { GCProfiler } from 'node:v8';
import { pathToFileURL } from 'node:url';

const modulePath = process.argv[2]!;
const { ConnectionLog } = (await import(pathToFileURL(modulePath).href)) as typeof import('../../src/connlog/recorder.ts');
const gc = (globalThis as { gc?: () => void }).gc!;

const log = new ConnectionLog();
const open: ReturnType<typeof log.open>[] = [];
const step = (i: number): void => {
  const conn = log.open('http', '127.0.0.1');
  conn.bytes = Object.assign({ up: 0, down: 0 }, { held: new Array<number>(500).fill(i) });
  open.push(conn);
  if (open.length > 50) open.shift()!.end({ result: 'ok', reason: 'closed' });
};
// Warm-up: the log's list at its working size, then everything long-lived promoted (two full collections).
for (let i = 0; i < 2000; i++) step(i);
gc();
gc();
const profiler = new GCProfiler();
profiler.start();
const ops = 40_000;
for (let i = 0; i < ops; i++) step(i);
const { statistics } = profiler.stop();
let kept = 0;
let scavenges = 0;
const used = (spaces: { spaceName: string; spaceUsedSize: number }[], names: string[]): number =>
  spaces.filter((s) => names.includes(s.spaceName)).reduce((n, s) => n + s.spaceUsedSize, 0);
for (const g of statistics) {
  if (g.gcType !== 'Scavenge') continue;
  scavenges++;
  const old = ['old_space', 'large_object_space'];
  kept += used(g.afterGC.heapSpaceStatistics, ['new_space']);
  kept += Math.max(0, used(g.afterGC.heapSpaceStatistics, old) - used(g.beforeGC.heapSpaceStatistics, old));
}
process.stdout.write(`${JSON.stringify({ scavenges, keptPerConnection: Math.round(kept / ops) })}\n`);
