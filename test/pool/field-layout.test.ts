// A pool's and a node entry's time fields keep their layout when they first hold a clock reading (a draw that
// brought nothing new sets the quiet's end; a failure sets the node's last failure and cooling). Had they started
// as small integers, V8 would move the objects to a new map at that moment, in steady state, and throw away every
// optimized function built on the old one (docs/benchmarks.md, "code dependencies"). Read with V8's
// %HaveSameMap: an object made before the change against one that went through it.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { Pool } from '../../src/pool/pool.ts';
import type { Drawer } from '../../src/pool/drawer.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';

setFlagsFromString('--allow-natives-syntax');
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: unknown, b: unknown) => boolean;

// A clock reading as the daemon's (Date.now()): far above V8's small-integer range.
const T = 1_764_000_000_000;

function node(port: number): UpstreamNode {
  return { id: `socks5://u@127.0.0.1:${port}`, protocol: 'socks5', host: '127.0.0.1', port, username: 'u', password: 'pw', source: 'pwd' };
}

/** Answers the same nodes on every draw (a backconnect gateway): the second draw brings nothing new. */
function sameNodes(port: number): Drawer {
  const nodes = [node(port)];
  return { draw: () => Promise.resolve(nodes) };
}

function pool(port: number): Pool {
  return new Pool({ key: { user: `u${port}`, productNo: 'P1', region: '' }, drawer: sameNodes(port), lowWater: 0, now: () => T });
}

function entryOf(p: Pool): object {
  return (p as unknown as { entries: object[] }).entries[0]!;
}

test('a quiet draw and a failure leave the pool and its entries on the maps they were made with', async () => {
  const untouched = pool(21001);
  await untouched.prefill();
  const changed = pool(21002);
  await changed.prefill();
  assert.ok(sameMap(untouched, changed));
  assert.ok(sameMap(entryOf(untouched), entryOf(changed)));

  // The second draw brings only the held node: the pool is quiet until T + redrawAfterMs.
  await changed.prefill();
  assert.ok(changed.snapshot().quietUntil! > T, 'the quiet is set');
  // A failure: the node's last failure and (maxFails 2, twice) its cooling become clock readings.
  const n = changed.acquireNow()!;
  changed.reportFailure(n, 'refused');
  changed.reportFailure(n, 'refused');
  assert.equal(changed.snapshot().cooling, 1);

  assert.ok(sameMap(untouched, changed), "the pool's map stayed");
  assert.ok(sameMap(entryOf(untouched), entryOf(changed)), "the entry's map stayed");
});

/** Each own field of a printed object and whether V8 holds it constant ("const data field") or not. */
function fieldKinds(printed: string): Map<string, string> {
  const kinds = new Map<string, string>();
  for (const m of printed.matchAll(/#(\w+): .*\((const data field|data field) \d+\)/g)) kinds.set(m[1]!, m[2]!);
  return kinds;
}

test("an entry's fields are as V8 holds them from its draw on: no write in service changes one (const or not)", () => {
  // V8 prints with C stdio: onto a file, since a pipe from node is a non-blocking socket that drops the tail.
  const dir = mkdtempSync(join(tmpdir(), 'rotor-field-layout-'));
  let out: string;
  try {
    const fd = openSync(join(dir, 'out.txt'), 'w');
    try {
      const child = fileURLToPath(new URL('./field-layout-child.ts', import.meta.url));
      execFileSync(process.execPath, ['--allow-natives-syntax', '--import', 'tsx', child], { stdio: ['ignore', fd, 'inherit'] });
    } finally {
      closeSync(fd);
    }
    out = readFileSync(join(dir, 'out.txt'), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const before = fieldKinds(out.slice(out.indexOf('@@BEFORE'), out.indexOf('@@AFTER')));
  const after = fieldKinds(out.slice(out.indexOf('@@AFTER'), out.indexOf('@@END')));
  assert.equal(before.size, 11, out);
  assert.deepEqual(Object.fromEntries(before), Object.fromEntries(after));
});
