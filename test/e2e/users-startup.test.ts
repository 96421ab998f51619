// Ready in seconds whatever the number of users (issue 24): 3,000 users in the store and 40 ms of platform
// latency (the sandbox's latency knob), so a one-at-a-time look at every user would hold the start for
// two minutes. The daemon is ready (startDaemon resolves, /readyz 200, a user authenticates) while the
// background check of every user is still pending; that check runs at most `accounts.platformConcurrency`
// calls at once (the sandbox's count of calls waiting out the latency), reports its progress in
// rotor_users_platform_check{state} and the log, and ends having asked the platform about every user.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { METRIC } from '../../src/telemetry/metrics.ts';
import { hashPasswordAsync } from '../../src/admission/password.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import { captureLogger } from '../support/logger.ts';
import { openTestStore } from '../support/store.ts';
import { metricValue, startGateway, waitFor, type Gateway } from './harness.ts';

const COUNT = 3_000;
const CONCURRENCY = 16;

function socksAuth(port: number, user: string, pass: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('error', reject);
    s.once('connect', () => {
      socks5Connect(s, { host: '127.0.0.1', port: 9 }, { username: user, password: pass }, (err) => {
        s.destroy();
        resolve(err?.code !== 'AUTH_FAILED');
      });
    });
  });
}

describe('start with many users and a slow platform', () => {
  let gw: Gateway;
  let dir: string;
  const log = captureLogger('info');
  let pendingAtReady = 0;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rotor-startup-'));
    const path = join(dir, 'rotor.db');
    const store = await openTestStore(path);
    const hash = await hashPasswordAsync('startup-password');
    const writes = Array.from({ length: COUNT }, (_, i) => {
      const name = `s${String(i).padStart(5, '0')}`;
      return {
        user: { name, data: { name, mainAccount: 'shop1', source: 'api', createdAt: 1 }, passwordHash: hash, state: 'ready' as const },
      };
    });
    const written = await store.putUsers(writes);
    assert.equal(written.filter((w) => w instanceof Error).length, 0);
    await store.close();
    gw = await startGateway({
      config: { store: { path }, platform: { sandbox: { latencyMs: 40 } }, accounts: { platformConcurrency: CONCURRENCY } },
      daemon: { logger: log.logger },
    });
    pendingAtReady = metricValue(await gw.metricsText(), METRIC.usersPlatformCheck, { state: 'pending' });
  });
  after(async () => {
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('ready while the check of every user runs in the background, bounded, with its progress visible', async () => {
    // Ready before the check: most users were still to be looked at when startDaemon resolved.
    assert.ok(pendingAtReady > COUNT / 2, `pending at ready: ${pendingAtReady}`);
    const ready = await fetch(`${gw.adminUrl}/readyz`);
    assert.equal(ready.status, 200, await ready.text());
    assert.equal(await socksAuth(gw.ports.socks5, 'alice', 'alice-pass'), true);
    assert.equal(await socksAuth(gw.ports.socks5, 's00042', 'startup-password'), true);
    assert.match(log.text(), /checking every user against the platform in the background/);

    let maxHeld = 0;
    const sim = gw.daemon.sim!;
    // The calls held by the latency, sampled in process (cheap) often; /metrics, a whole page, read less often.
    const sampler = setInterval(() => (maxHeld = Math.max(maxHeld, sim.inspect.heldByLatency())), 10);
    try {
      // The bound is watched while every call waits out the 40 ms, for four rounds of the workers from here;
      // then the latency drops to 1 ms so the rest of the pass (each user still asked, CONCURRENCY at a time)
      // is not half a minute of waiting on a timer.
      const asked = sim.inspect.calls().GetProxyUserInfo ?? 0;
      await waitFor(
        'four rounds of held calls',
        () => ((sim.inspect.calls().GetProxyUserInfo ?? 0) >= asked + 4 * CONCURRENCY ? true : undefined),
        60_000,
      );
      assert.ok(maxHeld >= 2, `at most ${maxHeld} calls waited at once at 40 ms`);
      sim.faults.latency(1);
      await waitFor(
        'the background check to end',
        async () => {
          const text = await gw.metricsText();
          return metricValue(text, METRIC.usersPlatformCheck, { state: 'pending' }) === 0 ? text : undefined;
        },
        120_000,
        250,
      );
    } finally {
      clearInterval(sampler);
    }
    const text = await gw.metricsText();
    const checked = metricValue(text, METRIC.usersPlatformCheck, { state: 'checked' });
    const failed = metricValue(text, METRIC.usersPlatformCheck, { state: 'failed' });
    assert.equal(checked + failed, COUNT + 2);
    // Several at once, never more than the setting (a few other calls — balances, draws — may wait beside them).
    assert.ok(maxHeld >= 2, `at most ${maxHeld} calls waited at once`);
    assert.ok(maxHeld <= CONCURRENCY + 3, `${maxHeld} calls waited at once`);
    assert.ok((sim.inspect.calls().GetProxyUserInfo ?? 0) >= COUNT, JSON.stringify(sim.inspect.calls()));
    await waitFor('the last progress line', () => (/platform check of users finished/.test(log.text()) ? true : undefined), 10_000);
  });
});
