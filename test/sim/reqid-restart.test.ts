// A retried reqId is answered once, also across a restart of the sandbox (src/sim/platform/replays.ts,
// persist.ts): the answer is kept with the state file, recorded in the same turn as the change it answers. A
// traffic return (money, no merchant number) whose reply was lost, retried after the sandbox restarted — closed
// gracefully, or killed once its state file was written — is answered with its first answer and returns once.
// The id ceiling (`<state file>.ids`) is made durable before it is relied on: fsync of the file and of its
// directory, seen with strace(1) on a child sandbox. In-process sandboxes on one state file, the real envelope
// over HTTP.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { buyTraffic } from '../support/orders.ts';
import { clientFor, rawCall } from './helpers.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic;
const MB = 1_048_576;
const dirs: string[] = [];
const sims: Simulator[] = [];
after(async () => {
  for (const s of sims) await s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function stateFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-sim-reqid-'));
  dirs.push(dir);
  return join(dir, 'rotor.db.sandbox.json');
}

async function sandbox(file: string, intervalMs: number): Promise<Simulator> {
  const sim = await startSimulator({ upstreams: false, stateFile: file, orderDelayMs: 20, statePersist: { intervalMs, spacing: 0 } });
  sims.push(sim);
  return sim;
}

async function withTraffic(sim: Simulator): Promise<void> {
  const client = clientFor(sim);
  await client.call('CreateUser', { appUsername: 'shop', status: 1 });
  await buyTraffic(client, 'shop', FLOW, 1000);
  client.close();
}

const total = (sim: Simulator): number => sim.inspect.balance('shop', FLOW)!.totalBytes;
const refunds = (sim: Simulator): number => sim.inspect.charges().filter((c) => c.operation === 'DynamicProxyReturn').length;
const ret = { appUsername: 'shop', proxyType: 104, productNo: FLOW, flowNum: 10 };

test('a return whose reply was lost, retried after a graceful restart: answered with its first answer, returned once', async () => {
  const file = stateFile();
  const first = await sandbox(file, 1000);
  await withTraffic(first);
  const t0 = total(first);
  first.faults.dropNext(1, 'DynamicProxyReturn');
  await assert.rejects(rawCall(first, 'DynamicProxyReturn', ret, { reqId: 'ret-restart' }), 'the reply is lost');
  assert.equal(t0 - total(first), 10 * MB, 'the lost call did the work');
  // The ciphertext as sent is what a retry resends: the client keeps the same reqId and params.
  const sent = await rawCall(first, 'DynamicProxyReturn', ret, { reqId: 'ret-restart-2' });
  await first.close();

  const second = await sandbox(file, 1000);
  assert.equal(total(second), t0 - 20 * MB);
  const r0 = refunds(second);
  const retry = await rawCall(second, 'DynamicProxyReturn', ret, { reqId: 'ret-restart' });
  assert.equal(retry.code, 200);
  assert.deepEqual(retry.value, { returnAmount: 0.04 }, 'the first answer');
  const again = await rawCall(second, 'DynamicProxyReturn', ret, { reqId: 'ret-restart-2' });
  assert.deepEqual(again, sent, 'the very reply first sent');
  assert.equal(total(second), t0 - 20 * MB, 'not returned again after the restart');
  assert.equal(refunds(second), r0, 'no new refund');
  // A new reqId is a new return.
  await rawCall(second, 'DynamicProxyReturn', ret, { reqId: 'ret-new' });
  assert.equal(total(second), t0 - 30 * MB);
});

test('killed once its state file was written: the next sandbox on the file answers the retry without returning again', async () => {
  const file = stateFile();
  const killed = await sandbox(file, 20);
  await withTraffic(killed);
  const t0 = total(killed);
  await rawCall(killed, 'DynamicProxyReturn', ret, { reqId: 'ret-kill' });
  // The change and its remembered reqId are written together by the timer (no close: as if killed after).
  const deadline = Date.now() + 10_000;
  while (!readFileSync(file, 'utf8').includes('"ret-kill"')) {
    assert.ok(Date.now() < deadline, 'the state file was written');
    await killed.stateSettled();
    await new Promise((r) => setTimeout(r, 10));
  }
  const saved = JSON.parse(readFileSync(file, 'utf8')) as { replies?: [string, unknown][] };
  assert.ok(
    saved.replies?.some(([id]) => id === 'ret-kill'),
    'the reqId is in the state file',
  );

  const next = await sandbox(file, 3_600_000);
  assert.equal(total(next), t0 - 10 * MB, 'the return is in the file');
  const retry = await rawCall(next, 'DynamicProxyReturn', ret, { reqId: 'ret-kill' });
  assert.equal(retry.code, 200);
  assert.equal(total(next), t0 - 10 * MB, 'returned once');
});

test('the id ceiling is fsynced (file and directory) before the id past the old one is answered', () => {
  const file = stateFile();
  const log = `${file}.strace`;
  execFileSync(
    'strace',
    [
      '-f',
      '-qq',
      '-o',
      log,
      '-e',
      'trace=openat,fsync,fdatasync,rename,renameat,renameat2',
      process.execPath,
      '--import',
      'tsx',
      join(import.meta.dirname, 'fixtures', 'ids-ceiling.ts'),
      file,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], timeout: 60_000 },
  );
  const lines = readFileSync(log, 'utf8').split('\n');
  const ids = `${file}.ids`;
  const opened = new Map<string, string>(); // descriptor → the path it was last opened on
  let fileSynced = false;
  let renamed = false;
  let dirSynced = false;
  for (const line of lines) {
    const open = /openat\(AT_FDCWD, "([^"]+)", [^)]*\)\s+= (\d+)/.exec(line);
    if (open) opened.set(open[2]!, open[1]!);
    const sync = /f(?:data)?sync\((\d+)\)\s+= 0/.exec(line);
    if (sync && opened.get(sync[1]!) === `${ids}.tmp` && !renamed) fileSynced = true;
    if (sync && opened.get(sync[1]!) === dirname(file) && renamed) dirSynced = true;
    if (/rename/.test(line) && line.includes(`"${ids}.tmp", "${ids}"`)) renamed = true;
  }
  assert.ok(fileSynced, 'the ceiling file was fsynced before its rename');
  assert.ok(renamed, 'and renamed into place');
  assert.ok(dirSynced, 'the directory was fsynced after the rename');
});
