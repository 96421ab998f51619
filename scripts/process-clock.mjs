// Loaded into each test process by scripts/run-tests.mjs --durations: at exit, appends the process's start
// (performance.timeOrigin, before tsx and the imports), end and CPU time to ROTOR_TEST_CLOCK, one JSON line.
import { appendFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const out = process.env.ROTOR_TEST_CLOCK;
if (out && process.argv[1]?.includes('/order/')) {
  process.once('exit', () => {
    const { user, system } = process.cpuUsage();
    const line = { file: process.argv[1], start: performance.timeOrigin, end: Date.now(), cpuMs: (user + system) / 1000 };
    appendFileSync(out, `${JSON.stringify(line)}\n`);
  });
}
