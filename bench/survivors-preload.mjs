// Preloaded into a gateway by bench/survivors.ts (node --import): V8's garbage collections from the process's start,
// by kind, with what each scavenge kept (v8.GCProfiler's heap-space figures before and after each collection):
//   copied    — bytes left in the young generation after the scavenge (what it copied within it),
//   promoted  — bytes the scavenge moved to the old generation (old and large-object spaces grew by them),
//   young     — bytes the young generation held when it began (allocated since the last one, plus the last survivors),
//   newSpace  — the young generation's committed size now (new_space, both semi-spaces), not a total,
// and the main thread's pause (the profiler's cost) per kind. Written to ROTOR_SURVIVORS_FILE every 100 ms.
// A measuring aid only; never loaded by the daemon otherwise.
import { renameSync, writeFileSync } from 'node:fs';
import { GCProfiler, getHeapSpaceStatistics } from 'node:v8';

const file = process.env.ROTOR_SURVIVORS_FILE;
if (file) {
  const totals = {
    scavenges: 0,
    scavengeMs: 0,
    copied: 0,
    promoted: 0,
    young: 0,
    markCompacts: 0,
    markCompactMs: 0,
    otherGcs: 0,
    otherMs: 0,
    newSpace: 0,
  };
  const used = (stats, names) => {
    let n = 0;
    for (const s of stats.heapSpaceStatistics) if (names.includes(s.spaceName)) n += s.spaceUsedSize;
    return n;
  };
  const OLD = ['old_space', 'large_object_space'];
  const NEW = ['new_space', 'new_large_object_space'];
  let profiler = new GCProfiler();
  profiler.start();
  const take = () => {
    const { statistics } = profiler.stop();
    profiler = new GCProfiler();
    profiler.start();
    for (const gc of statistics) {
      const ms = gc.cost / 1000;
      if (gc.gcType === 'Scavenge') {
        totals.scavenges++;
        totals.scavengeMs += ms;
        totals.young += used(gc.beforeGC, NEW);
        totals.copied += used(gc.afterGC, NEW);
        totals.promoted += Math.max(0, used(gc.afterGC, OLD) - used(gc.beforeGC, OLD));
      } else if (gc.gcType === 'MarkSweepCompact') {
        totals.markCompacts++;
        totals.markCompactMs += ms;
      } else {
        totals.otherGcs++;
        totals.otherMs += ms;
      }
    }
    totals.newSpace = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
    try {
      // Whole or not at all: the bench may read it at any moment.
      writeFileSync(`${file}.tmp`, JSON.stringify(totals));
      renameSync(`${file}.tmp`, file);
    } catch {
      // the bench reads the last good write
    }
  };
  setInterval(take, 100).unref();
}
