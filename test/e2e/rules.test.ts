// Destination rules end to end (issue 15 "Done when": a rule refuses port 25 and `*.blocked.test` through
// socks5h and CONNECT without dialing any upstream). Real daemon on the sandbox, real curl in every mode: the
// refusal is 403 / SOCKS5 0x02 (curl exit 97), counted as `not_allowed`, and neither the pool nor any
// upstream is touched (no draw, no upstream connect, the target never hears from anyone).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { curl, startGateway, startTarget, viaConnect, viaHttp, viaSocks5h, type Gateway, type Target } from './harness.ts';

describe('destination rules', () => {
  let gw: Gateway;
  let target: Target;

  before(async () => {
    gw = await startGateway({
      config: {
        users: [{ name: 'alice', password: 'alice-pass', mainAccount: 'shop1', rules: { denyHosts: ['*.blocked.test'] } }],
      },
    });
    target = await startTarget();
  });
  after(async () => {
    await target.close();
    await gw.close();
  });

  const upstreamWork = async () => ({
    draws: await gw.metric('rotor_draws_total'),
    dials: await gw.metric('rotor_upstream_connect_seconds_count'),
    refused: await gw.metric('rotor_proxy_connections_total', { result: 'not_allowed' }),
  });

  test('an allowed target still works (the pool is warm, so a refusal below is the rules, not an empty pool)', async () => {
    const r = await curl([...viaSocks5h(gw.ports.socks5, 'alice', 'alice-pass'), target.url()]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.ok(gw.exits.includes(r.body));
  });

  const cases = [
    {
      name: 'socks5h to *.blocked.test',
      args: () => [...viaSocks5h(gw.ports.socks5, 'alice', 'alice-pass'), 'http://www.blocked.test/'],
      exit: 97,
      status: 0,
      connect: 0,
    },
    {
      name: 'socks5h to port 25 (global default)',
      args: () => [...viaSocks5h(gw.ports.socks5, 'alice', 'alice-pass'), 'http://127.0.0.1:25/'],
      exit: 97,
      status: 0,
      connect: 0,
    },
    {
      name: 'CONNECT to *.blocked.test',
      args: () => [...viaConnect(gw.ports.http, 'alice', 'alice-pass'), 'http://a.b.blocked.test/'],
      exit: 56,
      status: 0,
      connect: 403,
    },
    {
      name: 'CONNECT to port 25',
      args: () => [...viaConnect(gw.ports.http, 'alice', 'alice-pass'), `http://127.0.0.1:25/`],
      exit: 56,
      status: 0,
      connect: 403,
    },
    {
      name: 'absolute URI to *.blocked.test',
      args: () => [...viaHttp(gw.ports.http, 'alice', 'alice-pass'), 'http://x.blocked.test/'],
      exit: 0,
      status: 403,
      connect: 0,
    },
    {
      name: 'absolute URI to port 25',
      args: () => [...viaHttp(gw.ports.http, 'alice', 'alice-pass'), 'http://127.0.0.1:25/'],
      exit: 0,
      status: 403,
      connect: 0,
    },
  ];
  for (const c of cases) {
    test(`${c.name}: refused before any dial`, async () => {
      const before = await upstreamWork();
      const requests = target.requests;
      const r = await curl(c.args());
      assert.equal(r.exitCode, c.exit, `curl exit ${r.exitCode}: ${r.stderr}`);
      if (c.status) assert.equal(r.status, c.status);
      // curl reports the CONNECT answer's status on stderr ("CONNECT tunnel failed, response 403").
      if (c.connect) assert.match(r.stderr, new RegExp(`response ${c.connect}`));
      if (c.status === 403 && c.exit === 0) assert.match(r.body, /is not allowed/);
      const now = await upstreamWork();
      assert.equal(now.refused, before.refused + 1, 'counted as not_allowed');
      assert.equal(now.draws, before.draws, 'no draw');
      assert.equal(now.dials, before.dials, 'no upstream dialed');
      assert.equal(target.requests, requests);
    });
  }
});
