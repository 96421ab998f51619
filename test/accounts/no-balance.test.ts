// A customer on a main account without traffic is refused at once with the reason (403, the account's
// balance named), never `502 the upstream refused the connection` after every pool node went cooling; an
// order that credits the account serves the customer within a second of its final callback (the balance is
// read again at once, not at the next poll). The real daemon on the embedded sandbox over real HTTP (the
// platform's callbacks included), curl as the client.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { curl, startGateway, startTarget, viaConnect, viaSocks5h, type Gateway, type Target } from '../e2e/harness.ts';
import { waitFor } from '../support/wait.ts';

const TOKEN = 'no-balance-token-1f3a';
const FLOW = 'DYN-104-FLOW';

describe('account faults are refusals: a main account without traffic', () => {
  let gw: Gateway;
  let target: Target;

  before(async () => {
    target = await startTarget();
    gw = await startGateway({
      orderDelayMs: 300,
      config: {
        admin: { token: TOKEN },
        // The sandbox credits no demo traffic; balances are polled rarely: only the refusal path may tell.
        accounts: { sandboxFlowMb: 0, balancePollMs: 600_000 },
        users: [],
      },
    });
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  test('403 with the reason at once, no node cooled; served within 1 s of the order final', async () => {
    const created = await gw.admin('/v1/users', { body: { name: 'newbie', password: 'newbie-pw', mainAccount: 'freshshop' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));

    // At once: the very first connection is refused for the balance, on both listeners.
    const started = Date.now();
    const first = await curl(['-i', ...viaConnect(gw.ports.http, 'newbie', 'newbie-pw'), target.url()]);
    assert.notEqual(first.exitCode, 0);
    assert.match(first.body + first.stderr, /403/, `the CONNECT answer: ${first.body} ${first.stderr}`);
    assert.match(first.body, /balance|traffic/i, `the reason is given: ${first.body}`);
    assert.ok(Date.now() - started < 5000, `answered in ${Date.now() - started} ms`);
    const socks = await curl([...viaSocks5h(gw.ports.socks5, 'newbie', 'newbie-pw'), target.url()]);
    assert.equal(socks.exitCode, 97, `SOCKS5 refused (0x02): ${socks.stderr}`);
    for (let i = 0; i < 3; i++) {
      const again = await curl(['-i', ...viaConnect(gw.ports.http, 'newbie', 'newbie-pw'), target.url()]);
      assert.match(again.body + again.stderr, /403/);
    }
    const records = await (async () => {
      await gw.daemon.connections.recorder.flush();
      return (await gw.admin<{ items: Array<{ result: string; reason: string | null }> }>('/v1/connections?user=newbie')).body.items;
    })();
    assert.ok(records.length >= 5);
    assert.ok(
      records.every((r) => r.result === 'limited'),
      `every refusal recorded as limited: ${JSON.stringify(records)}`,
    );
    const cooling = await gw.metric('rotor_pool_proxies', { state: 'cooling' });
    assert.equal(cooling, 0, 'no node cooled for an account problem');

    // Traffic bought for the account: served within 1 s of the order's final state.
    const opened = await gw.admin<{ appOrderNo: string }>('/v1/orders/open', {
      body: { productNo: FLOW, appUsername: 'freshshop', flow: 1024, cycleTimes: 1 },
    });
    assert.equal(opened.status, 202, JSON.stringify(opened.body));
    await waitFor(
      async () => (await gw.admin<{ status: number }>(`/v1/orders/${opened.body.appOrderNo}`)).body.status === 3,
      20_000,
      'the order final',
      10,
    );
    const finalAt = Date.now();
    const served = await waitFor(
      async () => {
        const r = await curl([...viaConnect(gw.ports.http, 'newbie', 'newbie-pw'), target.url()]);
        return r.status === 200 ? r : undefined;
      },
      10_000,
      'a 200 after the credit',
      20,
    );
    const after = Date.now() - finalAt;
    assert.ok(gw.exits.includes(served.body));
    assert.ok(after <= 1000, `served ${after} ms after the order was final (≤ 1000 ms)`);
  });
});
