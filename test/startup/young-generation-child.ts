// Child of young-generation.test.ts, run with `npm start`'s node options: a load that keeps some of what it
// allocates (a ring of live objects, as tunnels in flight are), then a slow drip like an idle daemon's timers.
// Prints {"grown": bytes, "shrunk": bytes, "shrunkAfterMs": ms | null}: the young generation's largest committed
// size under the load, and its size once V8 shrank it while idle (null: not within the deadline).
import { getHeapSpaceStatistics } from 'node:v8';
import { setImmediate as turn, setTimeout as sleep } from 'node:timers/promises';

const young = (): number => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
const MiB = 1024 * 1024;
const ring: unknown[] = new Array(4000);
let at = 0;
let grown = young();
// The load is counted in allocations, not time, so a loaded machine runs the same one.
for (let t = 0; t < 400; t++) {
  for (let k = 0; k < 20_000; k++) ring[at++ % ring.length] = { k, s: `x${k}`, a: [k, k] };
  grown = Math.max(grown, young());
  await turn();
}
ring.fill(undefined);
const started = performance.now();
const deadline = started + Number(process.argv[2] ?? 90_000);
let drip: unknown;
while (young() > 2 * MiB && performance.now() < deadline) {
  drip = Array.from({ length: 1000 }, (_, k) => ({ k }));
  await sleep(50);
}
void drip;
const shrunk = young();
process.stdout.write(
  `${JSON.stringify({ grown, shrunk, shrunkAfterMs: shrunk <= 2 * MiB ? Math.round(performance.now() - started) : null })}\n`,
);
