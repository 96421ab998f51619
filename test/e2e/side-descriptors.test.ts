// A flood of idle connections on the admin port cannot take the descriptors the customers' tunnels need: the
// admin, callback and portal listeners together hold at most an eighth of the soft descriptor limit (at least
// 32; src/errors/descriptor-budget.ts), a newcomer past it closing the oldest idle one. Before, the admin listener
// alone took up to 1,024 connections whatever the limit: under a lowered limit the flood exhausted the process and
// the proxy listeners refused every customer. `rotor start` as a child on a sandbox in the test process (so the
// upstreams' descriptors are not the daemon's); its soft RLIMIT_NOFILE lowered with prlimit(1) to what it has open
// plus 200, then 400 silent connections to the admin port: an operator's request and a customer's tunnel both
// still succeed, the daemon keeps most of its descriptors free, and no exhaustion episode begins.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS } from '../../src/sim/index.ts';
import { buyTraffic } from '../support/orders.ts';
import { rawConfig, spawnDaemon, tempDir, waitFor, writeConfigFile } from './limits-harness.ts';

const PRODUCT = SIM_PRODUCTS.dynamicTraffic;
const USER = 'sdu';
const PASS = 'sdu-pass';
const FLOOD = 400;

/** A CONNECT through the HTTP listener: its status (0: closed without an answer), the tunnel closed again. */
function connectStatus(port: number, targetPort: number, timeoutMs = 10_000): Promise<number> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let buf = '';
    const done = (status: number): void => {
      clearTimeout(timer);
      s.destroy();
      resolve(status);
    };
    const timer = setTimeout(() => done(-1), timeoutMs);
    s.on('error', () => done(0));
    s.on('close', () => done(0));
    s.on('connect', () => {
      const auth = Buffer.from(`${USER}:${PASS}`).toString('base64');
      s.write(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
    });
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      if (buf.includes('\r\n')) done(Number(/^HTTP\/1\.[01] (\d{3})/.exec(buf)?.[1] ?? 0));
    });
  });
}

const openDescriptors = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;

function setSoftNofile(pid: number, soft: number): void {
  const hard = readFileSync(`/proc/${pid}/limits`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'))!
    .trim()
    .split(/\s+/)[4]!;
  execFileSync('prlimit', ['--pid', String(pid), `--nofile=${soft}:${hard}`]);
}

test('400 silent admin connections under a lowered limit: operators and customers still get in, no exhaustion', async () => {
  const sim = await startSimulator({ orderDelayMs: 50 });
  const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
  const target: Server = createServer((s) => s.on('error', () => undefined));
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  const targetPort = (target.address() as { port: number }).port;
  const dir = tempDir('rotor-side-descriptors-');
  const file = join(dir, 'rotor.yaml');
  const raw = rawConfig(dir, [{ name: USER, password: PASS, mainAccount: 'shop1', product: PRODUCT }], {
    accounts: { balancePollMs: 300 },
  }) as Record<string, unknown>;
  raw.platform = { mode: 'remote', baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, timeoutMs: 5000, retries: 0 };
  raw.pool = { ...(raw.pool as object), drawBatch: 3, warm: { perNode: 0 }, healthCheck: { intervalMs: 3_600_000 } };
  writeConfigFile(file, raw);
  const flood: Socket[] = [];
  const daemon = await spawnDaemon(file, join(dir, 'rotor.log'));
  try {
    await buyTraffic(client, 'shop1', PRODUCT, 1024);
    await waitFor(
      'a first tunnel (the bought traffic reached the pool)',
      async () => ((await connectStatus(daemon.ports.http, targetPort)) === 200 ? true : undefined),
      30_000,
      200,
    );
    const base = openDescriptors(daemon.pid);
    const limit = base + 200;
    setSoftNofile(daemon.pid, limit);

    let closedByDaemon = 0;
    for (let i = 0; i < FLOOD; i++) {
      const s = connect(daemon.ports.admin, '127.0.0.1');
      s.on('error', () => undefined);
      s.on('close', () => closedByDaemon++);
      await new Promise<void>((resolve) => {
        s.once('connect', resolve);
        s.once('close', resolve);
      });
      flood.push(s);
    }
    // The admin listener takes connections in order: once this request is answered, every flood socket was seen.
    const health = await fetch(`http://127.0.0.1:${daemon.ports.admin}/healthz`, { signal: AbortSignal.timeout(10_000) }).catch(
      (err: unknown) => err as Error,
    );
    assert.ok(!(health instanceof Error), `an operator's request during the flood: ${String(health)}`);
    assert.equal(health.status, 200);
    const status = await connectStatus(daemon.ports.http, targetPort);
    assert.equal(status, 200, "a customer's tunnel during the flood");
    const open = openDescriptors(daemon.pid);
    const held = await waitFor(
      'the flood shed to the budget',
      () => (FLOOD - closedByDaemon <= 64 ? FLOOD - closedByDaemon : undefined),
      10_000,
      20,
    );
    console.log(
      `# limit ${limit}: ${base} descriptors open before the flood, ${open} during it; ${held} of ${FLOOD} flood connections held`,
    );
    assert.ok(open < limit - 100, `the flood took the daemon's descriptors: ${open} open of ${limit}`);
    assert.ok(!/descriptors exhausted/i.test(daemon.logText()), 'no exhaustion episode');
  } finally {
    for (const s of flood) s.destroy();
    await daemon.stop();
    await new Promise((r) => target.close(r));
    client.close();
    await sim.close();
  }
});
