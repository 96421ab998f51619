// bench/procs.ts threadCpuMs: a thread that ends between two readings keeps its CPU in the process's figure
// (bench/ab.ts, bench/counts.ts and `npm run bench` subtract two readings; a sum over the threads alive at each
// reading lost the ended thread's whole time, and the difference could go negative).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpuMs, threadCpuMs } from '../../bench/procs.ts';

// A worker burns 300 ms of its own CPU (read from /proc/thread-self: a loaded machine stretches the wall time, not
// this) and says so; it ends when the parent is told 'end' on stdin.
const WORKER = `
const { parentPort } = require('node:worker_threads');
const { readFileSync } = require('node:fs');
const cpu = () => { const s = readFileSync('/proc/thread-self/stat', 'utf8'); const f = s.slice(s.lastIndexOf(')') + 2).split(' '); return (Number(f[11]) + Number(f[12])) * 10; };
let x = 0;
while (cpu() < 300) for (let i = 0; i < 100000; i++) x += i;
parentPort.postMessage('burned ' + x);
parentPort.once('message', () => process.exit(0));
`;
const SCRIPT = `
const { Worker } = require('node:worker_threads');
const w = new Worker(${JSON.stringify(WORKER)}, { eval: true });
w.on('message', () => console.log('burned'));
w.on('exit', () => console.log('ended'));
process.stdin.once('data', () => w.postMessage('end'));
process.stdin.once('end', () => process.exit(0));
`;

test('the CPU of a thread that ended between two readings stays in threadCpuMs and cpuMs', async () => {
  const child = spawn(process.execPath, ['-e', SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    const lines = createInterface({ input: child.stdout });
    const next = (want: string): Promise<void> =>
      new Promise((resolve) => {
        const on = (line: string): void => {
          if (line !== want) return;
          lines.off('line', on);
          resolve();
        };
        lines.on('line', on);
      });
    await next('burned');
    const before = threadCpuMs(child.pid!);
    const wholeBefore = cpuMs(child.pid!);
    // The worker's 300 ms are in the reading taken while it lives.
    assert.ok(before.other >= 250, JSON.stringify(before));
    const ended = next('ended');
    child.stdin.write('end\n');
    await ended;
    const after = threadCpuMs(child.pid!);
    // Ticks of 10 ms: an ended thread may round one tick differently; losing its time would be ~-300.
    assert.ok(after.other - before.other > -30, `other went from ${before.other} to ${after.other}`);
    assert.ok(cpuMs(child.pid!) - wholeBefore > -30);
    assert.ok(after.main + after.other - cpuMs(child.pid!) < 30);
  } finally {
    child.stdin.end();
    child.kill();
  }
});
