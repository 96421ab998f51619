// What V8's scavenges keep when objects pass through a long-lived Map or Set (the reason registries of open
// connections are live lists: src/connlog/live-list.ts). A Map or Set made old by two full collections holds 50
// objects of about 5 KB at a time, each added and soon deleted; for two seconds, bytes copied and promoted per
// object by the scavenges, against the same churn with no registry ('none') and with a live list ('list').
//
//   node --expose-gc --max-semi-space-size=4 --import tsx bench/map-churn.ts map|set|list|none
import { GCProfiler } from 'node:v8';
import { LiveList, type Listed } from '../src/connlog/live-list.ts';

interface Item extends Listed<Item> {
  id: number;
  payload: number[];
}
const mode = process.argv[2] ?? 'map';
if (!['map', 'set', 'list', 'none'].includes(mode)) throw new Error('mode: map, set, list or none');
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const map = new Map<number, Item>();
const set = new Set<Item>();
const list = new LiveList<Item>();
gc();
gc();
const inFlight: Item[] = [];
let n = 0;
let ops = 0;
const profiler = new GCProfiler();
profiler.start();
const t0 = Date.now();
const tick = (): void => {
  for (let i = 0; i < 200; i++) {
    const o: Item = { id: n++, payload: new Array<number>(600).fill(i), prevLive: null, nextLive: null };
    if (mode === 'map') map.set(o.id, o);
    else if (mode === 'set') set.add(o);
    else if (mode === 'list') list.add(o);
    inFlight.push(o);
    if (inFlight.length > 50) {
      const d = inFlight.shift()!;
      if (mode === 'map') map.delete(d.id);
      else if (mode === 'set') set.delete(d);
      else if (mode === 'list') list.remove(d);
    }
    ops++;
  }
  if (Date.now() - t0 < 2000) setImmediate(tick);
  else done();
};
const done = (): void => {
  const { statistics } = profiler.stop();
  const used = (spaces: { spaceName: string; spaceUsedSize: number }[], names: string[]): number =>
    spaces.filter((s) => names.includes(s.spaceName)).reduce((a, s) => a + s.spaceUsedSize, 0);
  let copied = 0;
  let promoted = 0;
  let scavenges = 0;
  for (const g of statistics) {
    if (g.gcType !== 'Scavenge') continue;
    scavenges++;
    copied += used(g.afterGC.heapSpaceStatistics, ['new_space']);
    promoted += Math.max(0, used(g.afterGC.heapSpaceStatistics, ['old_space']) - used(g.beforeGC.heapSpaceStatistics, ['old_space']));
  }
  process.stdout.write(
    `${mode}: ${ops} objects in 2 s, ${scavenges} scavenges, per object ${(copied / ops).toFixed(0)} B copied + ${(promoted / ops).toFixed(0)} B promoted\n`,
  );
};
tick();
