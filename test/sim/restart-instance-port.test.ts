// A static instance keeps its address across a restart of the sandbox (src/sim/platform/persist.ts): its
// upstream is opened again on the port the state file remembers. When that port is taken meanwhile, it gets a
// new one and the sandbox tells the merchant the way a platform tells of a changed instance (seed part 6: an
// instance callback, no op), as soon as the merchant's callback address is known. In-process sandboxes on one
// state file, the real client over HTTP, a real SOCKS5 relay through the instance.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SocksClient } from 'socks';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { orderSucceeded } from '../support/orders.ts';
import { poll } from '../support/wait.ts';
import { clientFor } from './helpers.ts';

const dirs: string[] = [];
const sims: Simulator[] = [];
const servers: Server[] = [];
after(async () => {
  for (const s of sims) await s.close();
  for (const s of servers) await new Promise<void>((r) => s.close(() => r()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function sandbox(file: string, callbackUrl?: string): Promise<Simulator> {
  const sim = await startSimulator({ stateFile: file, orderDelayMs: 30, ...(callbackUrl ? { callbackUrl } : {}) });
  sims.push(sim);
  return sim;
}

interface Inst {
  instanceNo: string;
  ip: string;
  port: number;
  username: string;
  pwd: string;
}

async function buyInstance(sim: Simulator): Promise<Inst> {
  const client = clientFor(sim);
  const o = await client.call('InstanceOpen', {
    appOrderNo: `buy${Date.now()}`,
    params: [{ productNo: SIM_PRODUCTS.staticUsSocks, count: 1 }],
  });
  await orderSucceeded(client, o.orderNo);
  const order = await client.call('GetOrder', { orderNo: o.orderNo, pageSize: 10 });
  const no = order.instances![0]!.instanceNo;
  const [inst] = await client.call('GetInstance', { instances: [no] });
  client.close();
  return inst as unknown as Inst;
}

async function platformInstance(sim: Simulator, no: string): Promise<Inst> {
  const client = clientFor(sim);
  const [inst] = await client.call('GetInstance', { instances: [no] });
  client.close();
  return inst as unknown as Inst;
}

/** A SOCKS5 handshake through the instance's upstream with its credentials (to a loopback listener). */
async function serves(inst: Inst, target: number): Promise<boolean> {
  try {
    const { socket } = await SocksClient.createConnection({
      proxy: { host: '127.0.0.1', port: inst.port, type: 5, userId: inst.username, password: inst.pwd },
      command: 'connect',
      destination: { host: '127.0.0.1', port: target },
      timeout: 5_000,
    });
    socket.destroy();
    return true;
  } catch {
    return false;
  }
}

async function listener(port = 0): Promise<Server> {
  const s = createServer((c) => c.end());
  servers.push(s);
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => resolve());
  });
  return s;
}

test('after a restart an instance answers on the port it had; a taken port moves it and an instance callback says so', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-sim-inst-port-'));
  dirs.push(dir);
  const file = join(dir, 'rotor.db.sandbox.json');
  const target = await listener();
  const targetPort = (target.address() as { port: number }).port;

  const first = await sandbox(file);
  const inst = await buyInstance(first);
  assert.ok(await serves(inst, targetPort), 'serves before the restart');
  await first.close();

  // The port is free at the restart: the same address.
  const second = await sandbox(file);
  const again = await platformInstance(second, inst.instanceNo);
  assert.equal(again.port, inst.port, 'the instance keeps its port');
  assert.ok(await serves(inst, targetPort), 'the old address serves after the restart');
  assert.deepEqual(second.inspect.callbacks({ type: 'instance', no: inst.instanceNo }), [], 'nothing to tell');
  await second.close();

  // The port is taken while the sandbox is down: a new port, told once the callback address is set.
  await listener(inst.port);
  const third = await sandbox(file);
  const moved = await platformInstance(third, inst.instanceNo);
  assert.notEqual(moved.port, inst.port, 'a new port');
  assert.ok(await serves(moved, targetPort), 'the new address serves');
  assert.deepEqual(third.inspect.callbacks({ type: 'instance', no: inst.instanceNo }), [], 'no callback address yet');
  const seen: string[] = [];
  const hook = createHttpListener(seen);
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', () => r()));
  third.setCallbackUrl(`http://127.0.0.1:${(hook.address() as { port: number }).port}/cb`);
  const sent = third.inspect.callbacks({ type: 'instance', no: inst.instanceNo });
  assert.equal(sent.length, 1, 'one instance callback once the address is known');
  assert.equal(sent[0]!.op, '');
  await poll(() => seen.some((u) => u.includes('type=instance') && u.includes(`no=${inst.instanceNo}`)), {
    what: 'the instance callback to arrive',
    timeoutMs: 10_000,
  });
  await third.close();
  await new Promise<void>((r) => hook.close(() => r()));

  // The moved port was written: the next start prefers it.
  const fourth = await sandbox(file);
  assert.equal((await platformInstance(fourth, inst.instanceNo)).port, moved.port);
});

function createHttpListener(seen: string[]): HttpServer {
  return createHttpServer((req, res) => {
    seen.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"code":"success","msg":"ok"}');
  });
}
