// A user's period usage across daemon restarts, stopped by SIGTERM and by SIGKILL while its download is in
// flight, on the store ROTOR_TEST_STORE names (SQLite, or Redis as a fleet of one): after the restart the
// usage the daemon reports is the usage it stored, exactly, counted once (issue 15: a loaded Redis run once
// read it doubled after a restart). SIGTERM loses nothing: the figure is at least the last one read before
// the signal; SIGKILL may lose what was not yet written, never adds. A real child daemon, real curl.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { join } from 'node:path';
import { PlatformClient } from '../../src/platform/client.ts';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { openTestStore, testStoreConfig } from '../support/store.ts';
import {
  adminGet,
  adminSend,
  cleanup,
  curl,
  rawConfig,
  spawnDaemon,
  startTarget,
  tempDir,
  waitFor,
  writeConfigFile,
  type BytesTarget,
  type ChildDaemon,
} from './limits-harness.ts';

const MiB = 1024 * 1024;
const viaConnect = (port: number, user: string, pass: string) => ['-p', '-x', `http://${user}:${pass}@127.0.0.1:${port}`];

interface View {
  usedBytes: number;
  periodKey: string;
}

describe('period usage across restarts with traffic in flight', () => {
  let target: BytesTarget;
  // One platform for both runs of a daemon (an embedded sandbox would start empty again, as a real one does not).
  let sim: Simulator;
  let client: PlatformClient;
  before(async () => {
    target = await startTarget();
    sim = await startSimulator({ orderDelayMs: 100 });
    client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
  });
  after(async () => {
    await target.close();
    client.close();
    await sim.close();
    cleanup();
  });

  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    test(`${signal}: the usage after the restart is the stored usage, counted once`, async () => {
      const dir = tempDir('rotor-users-restart-');
      const path = join(dir, 'rotor.db');
      const file = join(dir, 'rotor.yaml');
      const account = `shop${signal === 'SIGTERM' ? 't' : 'k'}`;
      const raw = rawConfig(dir, [{ name: `owner${account}`, password: 'owner-pass', mainAccount: account }], {
        store: await testStoreConfig(path),
        accounts: { flushIntervalMs: 100, balancePollMs: 200 },
      });
      writeConfigFile(file, { ...raw, platform: { mode: 'remote', baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret } });
      let daemon: ChildDaemon = await spawnDaemon(file, join(dir, 'first.log'));
      const store = await openTestStore(path);
      try {
        // Traffic for the main account (the daemon made it at start).
        const credit = `credit${account}${process.pid}`;
        await client.call('InstanceOpen', {
          appOrderNo: credit,
          params: [{ productNo: SIM_PRODUCTS.dynamicTraffic, appUsername: account, flow: 1024, cycleTimes: 1 }],
        });
        await waitFor(
          'the traffic credit',
          async () => ((await client.call('GetOrder', { appOrderNo: credit })).status ?? 0) >= 3 || undefined,
          10_000,
          100,
        );
        const created = await adminSend(daemon.ports.admin, 'POST', '/v1/users', {
          name: 'cust',
          password: 'cust-pass',
          mainAccount: account,
          quota: { bytes: 500 * MiB, period: 'month' },
        });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const first = await waitFor(
          'a first download through the new user',
          async () => {
            const r = await curl([...viaConnect(daemon.ports.http, 'cust', 'cust-pass'), target.url(MiB)]);
            return r.size === MiB ? r : undefined;
          },
          15_000,
          200,
        );
        assert.equal(first.size, MiB);
        const { periodKey } = await adminGet<View>(daemon.ports.admin, '/v1/users/cust');
        const row = async () => (await store.getUsage(`cust@${periodKey}`))?.usedBytes ?? 0;
        // The first download written to the store (a flush, in a fleet the allowance's sync): the base.
        const base = await waitFor(
          'the first download in the store',
          async () => {
            const seen = (await adminGet<View>(daemon.ports.admin, '/v1/users/cust')).usedBytes;
            return seen >= MiB && (await row()) === seen ? seen : undefined;
          },
          20_000,
          100,
        );

        // A paced download in flight when the signal comes.
        const inflightBytes = 2 * MiB;
        const running = curl([...viaConnect(daemon.ports.http, 'cust', 'cust-pass'), target.url(inflightBytes, 512 * 1024)], {
          maxTimeS: 30,
        });
        const lastRead = await waitFor(
          'the download moving',
          async () => {
            const seen = (await adminGet<View>(daemon.ports.admin, '/v1/users/cust')).usedBytes;
            return seen > base + 128 * 1024 ? seen : undefined;
          },
          15_000,
          50,
        );
        if (signal === 'SIGTERM') await daemon.stop();
        else {
          daemon.signal('SIGKILL');
          assert.equal((await daemon.exited).signal, 'SIGKILL');
        }
        await running;

        daemon = await spawnDaemon(file, join(dir, 'second.log'));
        const afterView = await adminGet<View>(daemon.ports.admin, '/v1/users/cust');
        assert.equal(afterView.periodKey, periodKey);
        const stored = await row();
        assert.equal(afterView.usedBytes, stored, 'the daemon reports what it stored');
        assert.ok(
          afterView.usedBytes <= lastRead + inflightBytes + 64 * 1024,
          `counted once: ${afterView.usedBytes} after, ${lastRead} read before the ${signal}`,
        );
        if (signal === 'SIGTERM')
          assert.ok(afterView.usedBytes >= lastRead, `a graceful stop loses nothing: ${afterView.usedBytes} < ${lastRead}`);
        else assert.ok(afterView.usedBytes >= base, `a kill loses at most what was not yet written: ${afterView.usedBytes} < ${base}`);
        // The meter goes on from that figure: a small download later, what is reported and stored is it plus
        // that download (a second load of the stored figure would add it again).
        const more = await curl([...viaConnect(daemon.ports.http, 'cust', 'cust-pass'), target.url(1000)]);
        assert.equal(more.size, 1000);
        const next = await waitFor(
          'the small download in the store',
          async () => {
            const seen = (await adminGet<View>(daemon.ports.admin, '/v1/users/cust')).usedBytes;
            return seen > afterView.usedBytes && (await row()) === seen ? seen : undefined;
          },
          20_000,
          100,
        );
        assert.ok(
          next - afterView.usedBytes >= 1000 && next - afterView.usedBytes < 4000,
          `one small download more: ${next - afterView.usedBytes} bytes`,
        );
      } finally {
        await daemon.stop();
        await store.close();
      }
    });
  }
});
