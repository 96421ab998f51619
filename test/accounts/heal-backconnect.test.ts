// A backconnect gateway's user whose sub account the platform lost: the pool holds the one line the platform
// answers on every draw and, having drawn it twice, does not draw again for redrawAfterMs (the quiet). The
// re-created account has a new password, so the held line is refused until the pool draws again: once the
// account is made again, the user's pools forget the nodes drawn under the lost one and the next connection
// draws, instead of failing until the quiet ends. The real daemon on the embedded sandbox, curl through SOCKS5.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { curl, startGateway, startTarget, viaSocks5h, type Gateway, type Target } from '../e2e/harness.ts';
import { captureLogger } from '../support/logger.ts';
import { waitFor } from '../support/wait.ts';

const BACKCONNECT = SIM_PRODUCTS.dynamicTrafficCn;

interface PoolView {
  key: { user: string };
  nodes: Array<{ id: string }>;
  quietUntil?: number;
}

describe('a backconnect user whose sub account was made again', () => {
  let gw: Gateway;
  let target: Target;
  const log = captureLogger('info');

  before(async () => {
    target = await startTarget();
    gw = await startGateway({
      config: {
        // The quiet far longer than the test: only forgetting the lost account's line can bring a draw.
        pool: { lowWater: 2, drawBatch: 1, redrawAfterMs: 600_000, warm: { perNode: 0 } },
        accounts: { limitSyncMs: 600_000, balancePollMs: 600_000 },
        proxy: { retries: 2 },
        users: [{ name: 'gwuser', password: 'gwuser-pw', mainAccount: 'shop1', product: BACKCONNECT, draw: 'pwd', sessTime: 5 }],
        platform: { sandbox: { backconnect: [BACKCONNECT] } },
      },
      daemon: { logger: log.logger },
    });
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  const pool = async (): Promise<PoolView | undefined> =>
    (await gw.admin<PoolView[]>('/v1/pools')).body.find((p) => p.key.user === 'gwuser');

  test('served again once the account is back, though the pool is quiet', async () => {
    // Connections make the pool refill below lowWater; its second draw answers the same line: it goes quiet.
    const quiet = await waitFor(
      async () => {
        const r = await curl([...viaSocks5h(gw.ports.socks5, 'gwuser', 'gwuser-pw'), target.url('/hello')]);
        assert.equal(r.exitCode, 0, r.stderr);
        const p = await pool();
        return p && (p.quietUntil ?? 0) > gw.clock.now() ? p : undefined;
      },
      20_000,
      'the pool quiet',
    );
    assert.equal(quiet.nodes.length, 1);
    const del = await fetch(`${gw.daemon.sim!.baseUrl}/sim/accounts/gwuser`, { method: 'DELETE' });
    assert.equal(del.status, 200);
    let last = '';
    await waitFor(
      async () => {
        const r = await curl([...viaSocks5h(gw.ports.socks5, 'gwuser', 'gwuser-pw'), target.url('/hello')]);
        last = `curl exit ${r.exitCode}: ${r.stderr.trim().split('\n').at(-1) ?? ''}`;
        return r.exitCode === 0;
      },
      30_000,
      'gwuser served again',
    ).catch(async (err: Error) => {
      throw new Error(
        `${err.message}\nlast ${last}\npool ${JSON.stringify(await pool())}\nlog:\n${log.text().split('\n').slice(-30).join('\n')}`,
      );
    });
    assert.equal(await gw.metric('rotor_sub_account_heals_total', { outcome: 'created' }), 1, 'healed once');
    const after = await pool();
    assert.equal(after?.nodes.length, 1, 'the line drawn under the new account, the old one forgotten');
    assert.notEqual(after?.nodes[0]?.id, undefined);
  });
});
