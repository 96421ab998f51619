// V8's memory reducer runs one full collection when a daemon goes idle, not three (src/startup/heap.ts,
// tuneMemoryReducer): the second and third marked the whole heap again and freed next to nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tuneMemoryReducer } from '../../src/startup/heap.ts';

const CHILD = fileURLToPath(new URL('./memory-reducer-child.ts', import.meta.url));

test('a memory-reducer flag given to node wins over the daemon’s own', () => {
  assert.equal(tuneMemoryReducer(['--no-memory-reducer']), false);
  assert.equal(tuneMemoryReducer(['--memory_reducer_single_gc']), false);
});

/**
 * Runs the child under --trace-gc until some isolate of it has had its first memory-reducer collection,
 * then for `afterMs` more (the reducer paces its next ones 0.5 s apart); the reducer's collections per isolate.
 */
function reducerCollections(args: string[], afterMs: number): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--trace-gc', CHILD, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    const perIsolate = new Map<string, number>();
    let text = '';
    let timer: NodeJS.Timeout | undefined;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      text += chunk;
      let nl: number;
      while ((nl = text.indexOf('\n')) >= 0) {
        const line = text.slice(0, nl);
        text = text.slice(nl + 1);
        const m = /^\[\d+:(0x[0-9a-f]+)\].*Mark-Compact \(reduce\)/.exec(line);
        if (!m) continue;
        perIsolate.set(m[1]!, (perIsolate.get(m[1]!) ?? 0) + 1);
        timer ??= setTimeout(() => child.kill('SIGKILL'), afterMs);
      }
    });
    child.on('error', reject);
    child.on('exit', () => {
      clearTimeout(timer);
      resolve([...perIsolate.values()]);
    });
  });
}

test('an idle process runs one memory-reducer collection per isolate, not three', { timeout: 120_000 }, async () => {
  // The reducer starts 8 s after the start's collection once allocation has slowed; 4 s is 8 times its pacing.
  const counts = await reducerCollections([], 4_000);
  assert.ok(counts.length > 0, 'the reducer ran');
  assert.ok(
    counts.every((n) => n === 1),
    `reducer collections per isolate: ${counts.join(', ')}`,
  );
});
