// Platform numbers are never handed out twice (src/sim/platform/persist.ts): a sandbox that dies before its
// state file holds its last order (a SIGKILL within the write interval) has written its id ceiling ahead, so the
// next sandbox on the same file numbers its orders and instances above every number the first may have
// answered. It has forgotten the order (asked by that number: 10031), not handed its number to another. A
// graceful close leaves no gap. In-process sandboxes on one state file, the real client over HTTP.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { orderSucceeded } from '../support/orders.ts';
import { clientFor, codeOf } from './helpers.ts';

const dirs: string[] = [];
const sims: Simulator[] = [];
after(async () => {
  for (const s of sims) await s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function sandbox(file: string, intervalMs: number): Promise<Simulator> {
  const sim = await startSimulator({ upstreams: false, stateFile: file, orderDelayMs: 20, statePersist: { intervalMs } });
  sims.push(sim);
  return sim;
}

let n = 0;
async function open(sim: Simulator): Promise<{ orderNo: string; instanceNo: string }> {
  const client = clientFor(sim);
  const o = await client.call('InstanceOpen', { appOrderNo: `ids${n++}`, params: [{ productNo: SIM_PRODUCTS.staticUsSocks, count: 1 }] });
  await orderSucceeded(client, o.orderNo);
  const order = await client.call('GetOrder', { orderNo: o.orderNo, pageSize: 10 });
  client.close();
  return { orderNo: o.orderNo, instanceNo: order.instances![0]!.instanceNo };
}

const num = (id: string): number => Number(id.replace(/^\D+/, ''));

test('a sandbox killed before its file held its last order: the next one never hands out that order or instance number', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-sim-ids-'));
  dirs.push(dir);
  const file = join(dir, 'rotor.db.sandbox.json');
  // Never written by its timer: as if killed before the first write (it is closed only after the test).
  const killed = await sandbox(file, 3_600_000);
  const lost = await open(killed);
  assert.equal(killed.stateWrites(), 0, 'nothing of it in the state file');

  const next = await sandbox(file, 3_600_000);
  const client = clientFor(next);
  assert.equal(await codeOf(client.call('GetOrder', { orderNo: lost.orderNo })), 10031, 'the order is forgotten, not another one');
  const fresh = await open(next);
  client.close();
  assert.ok(num(fresh.orderNo) > num(lost.orderNo) && num(fresh.orderNo) > num(lost.instanceNo), `${fresh.orderNo} after ${lost.orderNo}`);
  assert.ok(num(fresh.instanceNo) > num(lost.instanceNo), `${fresh.instanceNo} after ${lost.instanceNo}`);
});

test('a graceful close continues the numbers right after the last one', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-sim-ids-'));
  dirs.push(dir);
  const file = join(dir, 'rotor.db.sandbox.json');
  const first = await sandbox(file, 1000);
  const a = await open(first);
  await first.close();
  const second = await sandbox(file, 1000);
  const b = await open(second);
  assert.equal(num(b.orderNo), num(a.instanceNo) + 1, `${b.orderNo} right after ${a.orderNo}/${a.instanceNo}`);
});
