// Preloaded into a gateway by bench/gc-bulk.ts (`node --import bench/gc-watch.mjs`): counts V8's garbage
// collections by kind and prints the running totals to stderr as `GCWATCH {json}` once a second when they moved.
// A measuring aid only; never loaded by the daemon otherwise.
import { constants, PerformanceObserver } from 'node:perf_hooks';

const totals = { major: 0, majorMs: 0, minor: 0, minorMs: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = entry.detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
      totals.major++;
      totals.majorMs += entry.duration;
    } else if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
      totals.minor++;
      totals.minorMs += entry.duration;
    }
  }
}).observe({ entryTypes: ['gc'] });
let last = '';
setInterval(() => {
  const now = JSON.stringify(totals);
  if (now !== last) process.stderr.write(`GCWATCH ${(last = now)}\n`);
}, 1000).unref();
