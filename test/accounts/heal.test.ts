// A sub account deleted on the platform behind Rotor's back (the sandbox's DELETE /sim/accounts/:name, over
// real HTTP): the next draw is answered 10092, Rotor re-creates the account once with the user's settings
// (logged, counted in rotor_sub_account_heals_total) and the user serves again. The real daemon on the embedded sandbox, curl through SOCKS5.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { curl, startGateway, startTarget, viaSocks5h, type Gateway, type Target } from '../e2e/harness.ts';
import { captureLogger } from '../support/logger.ts';
import { waitFor } from '../support/wait.ts';

describe('a sub account the platform lost is made again', () => {
  let gw: Gateway;
  let target: Target;
  const log = captureLogger('info');

  before(async () => {
    target = await startTarget();
    gw = await startGateway({
      config: {
        // No connections opened ahead (one authenticated before the deletion would still serve), and neither
        // timer heals within the test: only what the refusal itself starts can.
        pool: { lowWater: 1, drawBatch: 1, warm: { perNode: 0 } },
        accounts: { limitSyncMs: 600_000, balancePollMs: 600_000 },
        proxy: { retries: 2 },
        users: [
          { name: 'ivan', password: 'ivan-pw', mainAccount: 'shop1' },
          { name: 'jane', password: 'jane-pw', mainAccount: 'shop2' },
        ],
      },
      daemon: { logger: log.logger },
    });
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  const simCalls = async (): Promise<Record<string, number>> =>
    (await (await fetch(`${gw.daemon.sim!.baseUrl}/sim/calls`)).json()) as Record<string, number>;

  const subExists = async (name: string): Promise<boolean> => {
    const res = await fetch(`${gw.daemon.sim!.baseUrl}/sim/accounts`);
    const mains = (await res.json()) as { subs: { appUsername: string }[] }[];
    return mains.some((m) => m.subs.some((s) => s.appUsername === name));
  };

  test('deleted on the platform: the next draw re-creates it and the user serves', async () => {
    const first = await curl([...viaSocks5h(gw.ports.socks5, 'ivan', 'ivan-pw'), target.url('/hello')]);
    assert.equal(first.exitCode, 0, first.stderr);
    const callsBefore = await simCalls();
    const del = await fetch(`${gw.daemon.sim!.baseUrl}/sim/accounts/ivan`, { method: 'DELETE' });
    assert.equal(del.status, 200);
    assert.equal(await subExists('ivan'), false);
    // The nodes drawn before the deletion carry the lost account's credentials: their upstream refuses them.
    // That refusal has the balance read, then the sub account, which is found missing and made again at once
    // (not at the next limit sync, a minute later); the same nodes then serve again.
    let attempts = 0;
    let last = '';
    const ok = await waitFor(
      async () => {
        attempts++;
        const r = await curl([...viaSocks5h(gw.ports.socks5, 'ivan', 'ivan-pw'), target.url('/hello')]);
        last = `curl exit ${r.exitCode}: ${r.stderr.trim().split('\n').at(-1) ?? ''}`;
        // Connections opened ahead to nodes drawn before the deletion may still serve: until the account is back.
        return r.exitCode === 0 && (await subExists('ivan')) ? r : undefined;
      },
      20_000,
      'ivan served again',
    ).catch(async (err: Error) => {
      const pool = await gw.admin('/v1/pools').catch(() => ({ body: 'unreadable' }));
      throw new Error(
        `${err.message}\nlast ${last}\npools ${JSON.stringify(pool.body)}\nlog:\n${log.text().split('\n').slice(-40).join('\n')}`,
      );
    });
    assert.equal(ok.exitCode, 0);
    const calls = await simCalls();
    const made = (op: string) => (calls[op] ?? 0) - (callsBefore[op] ?? 0);
    // However many connections were refused meanwhile, the platform was asked once or twice, not per connection.
    assert.ok(made('ProxyInfo') <= 2, `ProxyInfo calls after ${attempts} attempts: ${made('ProxyInfo')}`);
    assert.ok(made('GetProxyUserInfo') <= 2, `GetProxyUserInfo calls: ${made('GetProxyUserInfo')}`);
    assert.equal(await subExists('ivan'), true, 'the sub account is back on the platform');
    assert.equal(await gw.metric('rotor_sub_account_heals_total', { outcome: 'created' }), 1, 'healed once');
    assert.match(log.text(), /"user":"ivan"[^\n]*lost the sub account: re-created/);
  });

  test('an account that cannot be made again is shown as such in GET /v1/users/:name', async () => {
    const first = await curl([...viaSocks5h(gw.ports.socks5, 'jane', 'jane-pw'), target.url('/hello')]);
    assert.equal(first.exitCode, 0, first.stderr);
    // The main account disabled on the platform: a sub account cannot be created under it (10061).
    const off = await gw.admin('/v1/platform/CreateUser', { body: { appUsername: 'shop2', status: 2 } });
    assert.equal(off.status, 200, JSON.stringify(off.body));
    assert.equal((await fetch(`${gw.daemon.sim!.baseUrl}/sim/accounts/jane`, { method: 'DELETE' })).status, 200);
    const shown = await waitFor(
      async () => {
        await curl([...viaSocks5h(gw.ports.socks5, 'jane', 'jane-pw'), target.url('/hello')]);
        const r = await gw.admin<{ platformAccount?: { state: string; reason: string; at: string } }>('/v1/users/jane');
        return r.body.platformAccount;
      },
      30_000,
      'jane shown with a failed platform account',
    );
    assert.equal(shown.state, 'failed');
    assert.match(shown.reason, /10061|disabled|exist/i);
    assert.ok(!Number.isNaN(Date.parse(shown.at)));
    assert.equal(await gw.metric('rotor_sub_account_heals_total', { outcome: 'failed' }), 1);
    const ivan = await gw.admin<Record<string, unknown>>('/v1/users/ivan');
    assert.equal(ivan.body.platformAccount, undefined, 'a healthy user has no platformAccount field');
  });
});
