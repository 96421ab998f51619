// What V8's young-generation collections (scavenges) keep per operation, for tests of long-lived registries:
// a child process run with 4 MiB semi-spaces (a fixed measuring setting: what survives a scavenge is counted at one size) and --expose-gc measures it (keptPerOperation);
// the test runs the child and reads its figure (keptInChild). A registry whose entries outlive their removal
// for the scavenger (a long-lived Map or Set: src/connlog/live-list.ts) shows here as kilobytes per operation.
import { spawn } from 'node:child_process';
import { GCProfiler } from 'node:v8';

export interface Kept {
  scavenges: number;
  /** bytes copied within the young generation plus bytes promoted, per operation */
  keptPerOperation: number;
}

/**
 * In the child: the long-lived state made by the warm-up moved to the old generation (two full collections, as
 * a running daemon's is), then `ops` operations measured; prints the result as one JSON line.
 */
export async function keptPerOperation(warmUp: () => Promise<void> | void, ops: number, run: () => Promise<void> | void): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new TypeError('run with --expose-gc');
  await warmUp();
  gc();
  gc();
  const profiler = new GCProfiler();
  profiler.start();
  await run();
  const { statistics } = profiler.stop();
  const used = (spaces: { spaceName: string; spaceUsedSize: number }[], names: string[]): number =>
    spaces.filter((s) => names.includes(s.spaceName)).reduce((n, s) => n + s.spaceUsedSize, 0);
  const old = ['old_space', 'large_object_space'];
  let kept = 0;
  let scavenges = 0;
  for (const g of statistics) {
    if (g.gcType !== 'Scavenge') continue;
    scavenges++;
    kept += used(g.afterGC.heapSpaceStatistics, ['new_space']);
    kept += Math.max(0, used(g.afterGC.heapSpaceStatistics, old) - used(g.beforeGC.heapSpaceStatistics, old));
  }
  const result: Kept = { scavenges, keptPerOperation: Math.round(kept / ops) };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/** Runs a child script (through tsx, 4 MiB semi-spaces, --expose-gc) with `args`; its measurement. */
export async function keptInChild(script: string, args: string[]): Promise<Kept> {
  const child = spawn(process.execPath, ['--max-semi-space-size=4', '--expose-gc', '--import', 'tsx', script, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`${script} exited with ${String(code)}`);
  return JSON.parse(out) as Kept;
}
