// The user-creation journal across a real crash: `rotor start` as a child process (its own SQLite file) on
// a sandbox platform that lives in the test process. The sandbox makes the sub account and then drops every
// reply to CreateProxyUser, so the daemon is stuck between the platform call and its store write; the test
// sees the sub account on the platform and SIGKILLs the daemon there. Restarted on the same file, the daemon
// resumes the creation (it finds the sub account made the first time) and ends with one consistent user:
// ready, authenticating, one sub account on the platform.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { PlatformClient } from '../../src/platform/client.ts';
import { PlatformError } from '../../src/platform/errors.ts';
import { startSimulator, SIM_PRODUCTS } from '../../src/sim/index.ts';
import { buyTraffic } from '../support/orders.ts';
import { adminSend, cleanup, curl, rawConfig, spawnDaemon, startTarget, tempDir, waitFor, writeConfigFile } from './limits-harness.ts';

const PRODUCT = SIM_PRODUCTS.dynamicTraffic;

test(
  'SIGKILL between the platform call and the store write ends, after restart, in one consistent user',
  { timeout: 120_000 },
  async () => {
    const sim = await startSimulator({ orderDelayMs: 100 });
    const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
    const bytes = await startTarget();
    const dir = tempDir('rotor-users-crash-');
    const file = join(dir, 'rotor.yaml');
    const raw = rawConfig(dir, [{ name: 'dave', password: 'dave-pass', mainAccount: 'shop1', product: PRODUCT }], {
      accounts: { balancePollMs: 300 },
    }) as Record<string, unknown>;
    // Retries with backoff keep the stuck call going long enough to be killed in the middle of it.
    raw.platform = {
      mode: 'remote',
      baseUrl: sim.baseUrl,
      appKey: sim.appKey,
      appSecret: sim.appSecret,
      timeoutMs: 2000,
      retries: 10,
      backoff: { baseMs: 300, maxMs: 1000 },
    };
    writeConfigFile(file, raw);
    let child = await spawnDaemon(file, join(dir, 'first.log'));
    try {
      await buyTraffic(client, 'shop1', PRODUCT, 1024);

      sim.faults.dropNext(1000, 'CreateProxyUser');
      const posting = adminSend(child.ports.admin, 'POST', '/v1/users', {
        name: 'crashy',
        password: 'crashy-pass',
        mainAccount: 'shop1',
        product: PRODUCT,
      }).catch((e: unknown) => e);
      await waitFor(
        'the sub account on the platform',
        async () => {
          try {
            await client.call('GetProxyUserInfo', { appUsername: 'crashy', productNo: PRODUCT });
            return true;
          } catch (err) {
            if (err instanceof PlatformError) return undefined;
            throw err;
          }
        },
        15_000,
        20,
      );
      child.signal('SIGKILL');
      const exit = await child.exited;
      assert.equal(exit.signal, 'SIGKILL');
      assert.ok((await posting) instanceof Error, 'the creation never answered');
      sim.faults.reset();

      child = await spawnDaemon(file, join(dir, 'second.log'));
      const view = await waitFor(
        'the creation to be resumed',
        async () => {
          const r = await adminSend<{ state: string; name: string }>(child.ports.admin, 'GET', '/v1/users/crashy', undefined);
          return r.status === 200 && r.body.state === 'ready' ? r.body : undefined;
        },
        20_000,
        100,
      );
      assert.equal(view.name, 'crashy');
      const list = await adminSend<{ name: string }[]>(child.ports.admin, 'GET', '/v1/users?prefix=crashy', undefined);
      assert.deepEqual(
        list.body.map((u) => u.name),
        ['crashy'],
        'one user',
      );
      const info = await client.call('GetProxyUserInfo', { appUsername: 'crashy', productNo: PRODUCT });
      assert.equal(info.status, 1, 'the sub account made the first time is the one in use');
      assert.ok(
        child.lines().some((l) => l.msg === 'unfinished user creation resumed and finished'),
        'the log says the creation was resumed',
      );
      const r = await waitFor(
        'the user to be served',
        async () => {
          const got = await curl(['-x', `socks5h://crashy:crashy-pass@127.0.0.1:${child.ports.socks5}`, bytes.url(1000)]);
          return got.http === 200 ? got : undefined;
        },
        10_000,
        200,
      );
      assert.equal(r.size, 1000);
    } finally {
      await child.stop();
      await bytes.close();
      client.close();
      await sim.close();
      cleanup();
    }
  },
);
