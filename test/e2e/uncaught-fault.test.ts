// A fault that escapes every handler in `rotor start` (a bug in some callback) is said in the log as a fatal
// line, and the daemon stops as for a signal without the drain: the open connection's record and the
// customer's counters are written before the process exits 1. Without the handler node printed the stack on
// stderr, exited at once, and the bytes of every open connection were missing from the bill.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { launchRotor, REPO_ROOT } from '../support/rotor-process.ts';
import {
  adminGet,
  cleanup,
  curl,
  rawConfig,
  spawnDaemon,
  startTarget,
  tempDir,
  userRow,
  waitFor,
  writeConfigFile,
  type BytesTarget,
} from './limits-harness.ts';

let target: BytesTarget;
before(async () => {
  target = await startTarget();
});
after(async () => {
  await target?.close();
  cleanup();
});

interface Live {
  user: string;
  bytesDown: number;
}
interface Row {
  user: string;
  bytesDown: number;
  result: string;
}

test('an uncaught fault is logged as fatal and the open connection is billed before the exit', async () => {
  const dir = tempDir();
  const file = join(dir, 'rotor.yaml');
  writeConfigFile(file, rawConfig(dir, [{ name: 'nora', password: 'nora-pw', mainAccount: 'shop1' }]));
  const d = await launchRotor({
    args: ['--config', file],
    logFile: join(dir, 'first.log'),
    nodeArgs: ['--import', join(REPO_ROOT, 'test/support/plant-fault.mjs')],
  });
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  try {
    // A slow download held open: 8 MB at 256 KB/s.
    const download = curl(['-x', `http://nora:nora-pw@127.0.0.1:${d.ports.http}`, target.url(8_000_000, 256_000)], { maxTimeS: 60 });
    const flowing = await waitFor(
      'the download to flow',
      async () => {
        const live = await adminGet<Live[]>(d.ports.admin, '/v1/connections/active');
        return live.find((c) => c.user === 'nora' && c.bytesDown > 100_000);
      },
      20_000,
    );
    assert.ok(flowing.bytesDown > 100_000);
    d.signal('SIGUSR2');
    exit = await d.exited;
    await download;
  } finally {
    if (!exit) await d.stop('SIGKILL');
  }
  assert.deepEqual(exit, { code: 1, signal: null }, d.output().slice(-1500));
  const fatal = d.lines().find((l) => l.level === 60 && l.msg === 'uncaught exception: stopping the daemon');
  assert.ok(fatal, `no fatal line:\n${d.output().slice(-1500)}`);
  assert.equal((fatal.err as { message?: string }).message, 'planted fault');
  assert.ok(
    d.lines().some((l) => l.msg === 'rotor stopped'),
    'the daemon stopped through its own close',
  );

  // The record of the cut download and nora's usage are in the store.
  const again = await spawnDaemon(file, join(dir, 'second.log'));
  try {
    const rows = await adminGet<{ items: Row[] }>(again.ports.admin, '/v1/connections?user=nora');
    const cut = rows.items.find((r) => r.user === 'nora' && r.bytesDown > 100_000);
    assert.ok(cut, `no record of the cut download: ${JSON.stringify(rows.items)}`);
    assert.equal(cut.result, 'shutdown');
    assert.ok((await userRow(again.ports.admin, 'nora')).usedBytes >= cut.bytesDown);
  } finally {
    await again.stop();
  }
});

test('a fault during a signal drain that would outlast it ends the process within 10 s', async () => {
  const dir = tempDir();
  const file = join(dir, 'rotor.yaml');
  const config = rawConfig(dir, [{ name: 'nora', password: 'nora-pw', mainAccount: 'shop1' }]) as { proxy: Record<string, unknown> };
  config.proxy.drainMs = 120_000;
  writeConfigFile(file, config);
  const d = await launchRotor({
    args: ['--config', file],
    logFile: join(dir, 'drain.log'),
    nodeArgs: ['--import', join(REPO_ROOT, 'test/support/plant-fault.mjs')],
  });
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  try {
    const download = curl(['-x', `http://nora:nora-pw@127.0.0.1:${d.ports.http}`, target.url(8_000_000, 64_000)], { maxTimeS: 120 });
    await waitFor(
      'the download to flow',
      async () => (await adminGet<Live[]>(d.ports.admin, '/v1/connections/active')).find((c) => c.user === 'nora' && c.bytesDown > 0),
      20_000,
    );
    d.signal('SIGTERM');
    await waitFor('the drain to begin', () => d.lines().some((l) => l.msg === 'shutting down: draining connections'), 10_000);
    const t0 = Date.now();
    d.signal('SIGUSR2');
    exit = await d.exited;
    const ms = Date.now() - t0;
    await download;
    assert.equal(exit.code, 1, d.output().slice(-1500));
    assert.ok(ms < 30_000, `the process ended ${ms} ms after the fault (drainMs 120 s)`);
    assert.ok(d.lines().some((l) => l.msg === 'stop after an uncaught error did not finish: exiting'));
  } finally {
    if (!exit) await d.stop('SIGKILL');
  }
});
