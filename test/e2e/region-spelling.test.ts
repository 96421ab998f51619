// A `-region-` code is matched against the platform's dictionaries case-insensitively (customers type
// `-region-usa`), and then drawn and pooled in the dictionary's own spelling. Rotor once admitted `usa` as known and
// sent it as typed: the sandbox, like any platform that looks `addressCode` up as written, answered 10091 "region
// does not exist" (CONNECT 503), and each spelling was a pool of its own (review15 #13). Real daemon on the
// embedded sandbox; an unknown code is still refused 403.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, startTarget, type Gateway, type Target } from './harness.ts';
import { connectStatus } from '../support/connect-head.ts';

let gw: Gateway;
let target: Target;
before(async () => {
  gw = await startGateway();
  target = await startTarget();
});
after(async () => {
  await target?.close();
  await gw?.close();
});

interface PoolView {
  key: { user: string; region: string };
  drawError?: { message: string };
}

test('-region-usa, -region-Usa and -region-USA are one region: served (the draw sends USA), one pool keyed USA', async () => {
  for (const spelling of ['usa', 'Usa', 'USA', 'usa']) {
    const status = await connectStatus(gw.ports.http, target.port, `alice-region-${spelling}`, 'alice-pass');
    const pools = await gw.admin<PoolView[]>('/v1/pools');
    const mine = pools.body.filter((p) => p.key.user === 'alice').map((p) => ({ region: p.key.region, drawError: p.drawError?.message }));
    assert.equal(status, 200, `-region-${spelling}: CONNECT answered ${status}; alice's pools: ${JSON.stringify(mine)}`);
  }
  const pools = await gw.admin<PoolView[]>('/v1/pools');
  assert.deepEqual(
    pools.body.filter((p) => p.key.user === 'alice').map((p) => p.key.region),
    ['USA'],
  );
});

test('a code in no dictionary, in any case, is still refused 403 before a pool exists', async () => {
  assert.equal(await connectStatus(gw.ports.http, target.port, 'alice-region-zzq', 'alice-pass'), 403);
  const pools = await gw.admin<PoolView[]>('/v1/pools');
  assert.ok(!pools.body.some((p) => p.key.region.toUpperCase() === 'ZZQ'));
});
