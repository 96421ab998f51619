// Password hashes run on threads of their own below the event loop's CPU priority (src/admission/hash-threads.ts):
// the right keys, at the configured Linux nice value, at most as many threads as hashes run at once, gone once
// idle or when the priority changes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scryptSync } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { HashThreads } from '../../src/admission/hash-threads.ts';
import { poll } from '../support/wait.ts';

/** The nice value of each thread of this process (Linux /proc/self/task/<tid>/stat, field 19). */
function niceValues(): number[] {
  const out: number[] = [];
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      out.push(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/** This process's own nice value: the threads' is relative to it (a run under `nice -n 10` starts at 10). */
const BASE = getPriority();
const below = (n: number): number => Math.min(19, BASE + n);

const job = (password: string, salt: Buffer) => ({ password, salt, length: 32, n: 16_384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });

test('hashes on lower-priority threads: the same keys as scryptSync, at most `size` threads at the configured nice, ended when idle', async () => {
  const threads = new HashThreads({ size: 2, nice: 13, idleMs: 5000 });
  const salts = Array.from({ length: 6 }, (_, i) => Buffer.alloc(16, i + 1));
  // The queue in front runs at most `size` at once; so does this test.
  const keys: Buffer[] = [];
  let most = 0;
  for (let i = 0; i < salts.length; i += 2) {
    const pair = await Promise.all([threads.scrypt(job(`pw${i}`, salts[i]!)), threads.scrypt(job(`pw${i + 1}`, salts[i + 1]!))]);
    most = Math.max(most, threads.alive);
    keys.push(...pair);
  }
  // Read at once, while both are surely alive: the checks below run scrypt on this thread, which on a loaded
  // machine outlasted idleMs (the threads had ended: 1 of 2 at nice 13).
  const atNice = niceValues().filter((n) => n === below(13)).length;
  assert.equal(most, 2, 'two threads, reused from pair to pair');
  assert.equal(atNice, 2, `both at nice ${below(13)} (13 below the process's ${BASE})`);
  for (const [i, key] of keys.entries()) {
    assert.deepEqual(key, scryptSync(`pw${i}`, salts[i]!, 32, { N: 16_384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }), `key ${i}`);
  }
  // Idle: both threads end, and with them their priority.
  await poll(() => threads.alive === 0 && niceValues().every((n) => n !== below(13)), { timeoutMs: 20_000, what: 'idle threads ended' });
  // Another burst starts them again.
  await threads.scrypt(job('again', salts[0]!));
  assert.equal(threads.alive, 1);
});

test('a hash in flight keeps the process waiting; the threads run at the process priority with nice 0', async () => {
  const threads = new HashThreads({ size: 1, nice: 0, idleMs: 60_000 });
  const atZero = (): number => niceValues().filter((n) => n === BASE).length;
  const before = atZero();
  const key = await threads.scrypt(job('plain', Buffer.alloc(16, 9)));
  assert.equal(key.length, 32);
  assert.equal(atZero(), before + 1, `one thread more, at the process's nice ${BASE}`);
  // An idle thread does not hold the process open (unref'd); this file would otherwise never end with idleMs 60 s.
  threads.configure({ size: 1, nice: 5, idleMs: 60_000 });
  await poll(() => threads.alive === 0, { timeoutMs: 20_000, what: 'the thread of the old priority ended' });
});
