// Child of memory-reducer.test.ts: the daemon's heap settings (or none with `off`), a start-like heap of
// garbage collected as the daemon's start does, then idle until killed; node's --trace-gc reports the rest.
import { collectStartGarbage, tuneHeapGrowth } from '../../src/startup/heap.ts';

if (process.argv[2] !== 'off') tuneHeapGrowth([]);
let garbage: Array<{ i: number; s: string }> | null = Array.from({ length: 200_000 }, (_, i) => ({ i, s: `start-garbage-${i}` }));
garbage.length = 0;
garbage = null;
collectStartGarbage();
process.stdout.write('collected\n');
setInterval(() => undefined, 1000);
