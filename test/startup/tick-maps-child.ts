// Run by test/startup/tick-maps.test.ts: node --allow-natives-syntax --expose-gc --import tsx
// tick-maps-child.ts keep|none. Allocates process.nextTick's feedback, runs a full collection with no tick
// object in the queue (as the daemon's start-up collection does), makes more nextTick calls, and prints the
// states of the tick object literal's define slots (V8's %DebugPrint, on stdout) after an `@@STATES` line, and
// whether the kept object and a real tick object share their map.
import { createHook } from 'node:async_hooks';
import { setFlagsFromString } from 'node:v8';
import { keepTickObjectMaps } from '../../src/startup/tick-maps.ts';

setFlagsFromString('--allow-natives-syntax');
const print = new Function('f', '%DebugPrint(f)') as (f: unknown) => void;
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: unknown, b: unknown) => boolean;
const gc = (globalThis as { gc?: () => void }).gc!;
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const kept = process.argv[2] === 'keep' ? keepTickObjectMaps() : undefined;
await turn();
for (let i = 0; i < 50; i++) process.nextTick(() => {});
await turn();
gc();
gc();
for (let i = 0; i < 50; i++) process.nextTick((a: unknown, b: unknown) => [a, b], i, 'x');
await turn();
process.stdout.write('@@STATES\n');
print(process.nextTick);
if (kept !== undefined) {
  // Read at the very end: the hook installs promise hooks, which the daemon must not (src/startup/tick-maps.ts).
  let tick: unknown;
  const hook = createHook({
    init(_id, type, _trigger, resource) {
      if (type === 'TickObject') tick = resource;
    },
  }).enable();
  process.nextTick(() => {});
  hook.disable();
  process.stdout.write(`\n@@SAME ${String(sameMap(kept, tick))}\n`);
}
