// V8's old-generation growth for the daemon. V8 counts external memory allocated since the last mark-compact
// (here: every socket read's 64 KiB buffer, freed only at the next scavenge) against the old generation's
// limit, and after a mark-compact sets that limit only ~11 MiB above Rotor's ~30 MiB of live heap (the
// module graph). A bulk tunnel swings external memory by 10-25 MiB between scavenges, so at a few hundred
// MiB/s V8 would run a full mark-compact of the whole heap several times a second and the CPU per MiB relayed
// would double. A growing factor of 3 gives the limit room for those swings; idle RSS is unchanged (the limit
// only matters while allocating). The figures are in docs/benchmarks.md, "M3's bimodality".
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export const HEAP_GROWING_PERCENT = 200;

/**
 * Sets V8's heap growing factor for this process unless node was started with one (`--heap-growing-percent`
 * on the command line wins). Set at runtime because NODE_OPTIONS refuses the flag, and `rotor start` is also
 * run as a plain command (systemd, supervisors), not only through `npm start`; V8 reads the factor at every
 * limit computation, so setting it before the daemon starts allocating is enough.
 */
export function tuneHeapGrowth(execArgv: readonly string[] = process.execArgv): boolean {
  tuneMemoryReducer(execArgv);
  if (execArgv.some((a) => a.startsWith('--heap-growing-percent') || a.startsWith('--heap_growing_percent'))) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}

/**
 * V8's memory reducer: after a full collection, once allocation has slowed (a daemon going idle after traffic,
 * or after its start), it runs up to three more full collections half a second apart to shrink the heap. On
 * Rotor's ~31 MiB heap the second and third free next to nothing (31.3 -> 31.3 -> 31.3 MiB at an idle daemon
 * after its start) and cost the most: 0.2-0.5 s of CPU each on a loaded 2-core machine, marking the whole
 * heap (docs/benchmarks.md, "An idle daemon's wake-ups"). One is kept, which does the shrinking. Set at run
 * time for the same reason as the growth factor (the whole process's flag, workers too), unless node was
 * started with a memory-reducer flag of its own. Called by tuneHeapGrowth.
 */
export function tuneMemoryReducer(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.some((a) => /^--(no-)?memory[-_]reducer/.test(a))) return false;
  setFlagsFromString('--memory-reducer-single-gc');
  return true;
}

/**
 * One full collection, asked when a large start's work is done: once the users are loaded (10,000 or more,
 * before the daemon answers anything: src/daemon/users.ts) and once the background platform check is over
 * (src/daemon/accounts.ts). A start at 100,000 users reads every record and usage row and checks every user:
 * hundreds of MiB of garbage that, under the growing factor above, V8 leaves in the heap until allocation
 * reaches three times the live heap, which an idle daemon may never do; its RSS was ~75 MiB higher for it
 * (docs/benchmarks.md, "A reseller's size"). The collection takes ~0.1-0.3 s of one event-loop turn, once,
 * when nothing else is starting. `gc` is not exposed to a daemon started without --expose-gc: the flag is
 * set at run time and the function taken from a fresh context (the flag applies to contexts made after it).
 */
export function collectStartGarbage(): { before: number; after: number; ms: number } {
  const gc = (globalThis as { gc?: Gc }).gc ?? exposedGc();
  const before = process.memoryUsage().heapUsed;
  const started = performance.now();
  // Compacting every page, this once: a plain full collection moves live objects only off the most fragmented
  // pages, so 100,000 users' records spread over the start's pages kept them all committed (at 100,000 users:
  // 228 MiB committed for 126 used). The flag is V8's own, set for this collection and cleared after it.
  setFlagsFromString('--compact-on-every-full-gc');
  try {
    gc();
  } finally {
    setFlagsFromString('--no-compact-on-every-full-gc');
  }
  return { before, after: process.memoryUsage().heapUsed, ms: performance.now() - started };
}

type Gc = () => void;

let exposed: Gc | undefined;
function exposedGc(): Gc {
  if (exposed === undefined) {
    setFlagsFromString('--expose-gc');
    exposed = runInNewContext('gc') as Gc;
  }
  return exposed;
}
