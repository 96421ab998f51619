// A start over 10,000 stored users forces no full collection before ready (src/daemon/users.ts): the forced
// compaction there was ~0.5-0.7 s of a 100,000-user fleet restart's CPU before ready (docs/benchmarks.md). The
// start's garbage goes with V8's own collections and the compaction after the background platform check,
// which is held back here (40 ms of platform latency, 2 calls at a time) so it cannot run before ready either.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { after, test } from 'node:test';
import { hashGeneratedPassword } from '../../src/admission/password.ts';
import { openTestStore } from '../support/store.ts';
import { startGateway, type Gateway } from './harness.ts';

const COUNT = 10_000;
let gw: Gateway | undefined;
const dir = mkdtempSync(join(tmpdir(), 'rotor-start-gc-'));

after(async () => {
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('a start over 10,000 stored users forces no full collection before it is ready', async () => {
  const path = join(dir, 'rotor.db');
  const store = await openTestStore(path);
  const hash = hashGeneratedPassword('start-gc-password-0123456789');
  const written = await store.putUsers(
    Array.from({ length: COUNT }, (_, i) => {
      const name = `g${String(i).padStart(5, '0')}`;
      return {
        user: { name, data: { name, mainAccount: 'shop1', source: 'api', createdAt: 1 }, passwordHash: hash, state: 'ready' as const },
      };
    }),
  );
  assert.equal(written.filter((w) => w instanceof Error).length, 0);
  await store.close();

  const forced: number[] = [];
  let collections = 0;
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      collections++;
      const detail = (e as unknown as { detail?: { kind: number; flags: number } }).detail;
      if (detail && (detail.flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) !== 0) forced.push(e.duration);
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  try {
    gw = await startGateway({
      config: { store: { path }, platform: { sandbox: { latencyMs: 40 } }, accounts: { platformConcurrency: 2 } },
    });
    assert.ok(gw.daemon.users.size >= COUNT, `${gw.daemon.users.size} users loaded`);
    // The observer's entries are delivered after the collection's task: one turn later they are all in.
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(collections > 0, 'collections were observed during the start');
    assert.deepEqual(forced, [], `forced collections before ready: ${forced.length}`);
  } finally {
    observer.disconnect();
  }
});
