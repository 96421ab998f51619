// Run by test/startup/tick-maps.test.ts: node --allow-natives-syntax --expose-gc --import tsx
// tick-maps-child.ts keep|none. Allocates process.nextTick's feedback, runs a full collection with no tick
// object in the queue (as the daemon's start-up collection does), makes more nextTick calls, and prints the
// states of the tick object literal's define slots (V8's %DebugPrint, on stdout) after an `@@STATES` line.
import { setFlagsFromString } from 'node:v8';
import { keepTickObjectMaps } from '../../src/startup/tick-maps.ts';

setFlagsFromString('--allow-natives-syntax');
const print = new Function('f', '%DebugPrint(f)') as (f: unknown) => void;
const gc = (globalThis as { gc?: () => void }).gc!;
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

if (process.argv[2] === 'keep') keepTickObjectMaps();
await turn();
for (let i = 0; i < 50; i++) process.nextTick(() => {});
await turn();
gc();
gc();
for (let i = 0; i < 50; i++) process.nextTick(() => {});
await turn();
process.stdout.write('@@STATES\n');
print(process.nextTick);
