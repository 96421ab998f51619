// A user's `instances`: the static instances it may name with `-instance-` (a static IP sold to one customer).
// Absent or null, every running instance of the merchant, as before; a list, only those (an empty list, none).
// The real daemon on the embedded sandbox, a static order opened through the admin API, curl through both
// listeners to a loopback target that answers with the exit it saw.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Exits } from '../../src/sim/upstreams/exits.ts';
import { curl, openStaticInstance, startGateway, startTarget, viaHttp, viaSocks5h, waitFor, type Gateway, type Target } from './harness.ts';

let gw: Gateway;
let target: Target;
let instanceNo: string;
let exit: string;

before(async () => {
  [gw, target] = await Promise.all([startGateway(), startTarget()]);
  instanceNo = await openStaticInstance(gw);
  exit = new Exits(gw.exits, Date.now).fixed(instanceNo);
  // The gateway learns running instances from the store on a short refresh: wait until a config user routes.
  await waitFor(
    'the gateway to route the new instance',
    async () => {
      const r = await curl([...viaHttp(gw.ports.http, `alice-instance-${instanceNo}`, 'alice-pass'), target.url('/i')]);
      return r.status === 200 ? r : undefined;
    },
    10_000,
    250,
  );
});
after(async () => {
  await gw?.close();
  await target?.close();
});

async function through(user: string, password: string): Promise<{ http: number; httpBody: string; socksExit: number; socksBody: string }> {
  const name = `${user}-instance-${instanceNo}`;
  const http = await curl([...viaHttp(gw.ports.http, name, password), target.url('/i')]);
  const socks = await curl([...viaSocks5h(gw.ports.socks5, name, password), target.url('/i')]);
  return { http: http.status, httpBody: http.body, socksExit: socks.exitCode, socksBody: socks.body };
}

test('a user whose instances name the instance leaves through it; one whose list does not is refused 403 / SOCKS5 0x02', async () => {
  const mine = await gw.admin('/v1/users', {
    body: { name: 'carol', mainAccount: 'shop1', password: 'carol-pass', instances: [instanceNo] },
  });
  assert.equal(mine.status, 201, JSON.stringify(mine.body));
  const other = await gw.admin('/v1/users', {
    body: { name: 'dave', mainAccount: 'shop1', password: 'dave-pass', instances: ['INS00000001'] },
  });
  assert.equal(other.status, 201, JSON.stringify(other.body));
  const none = await gw.admin('/v1/users', { body: { name: 'erin', mainAccount: 'shop1', password: 'erin-pass', instances: [] } });
  // An instanceNo holding '-' (as a platform may write it) is a right like any other.
  const dashed = await gw.admin('/v1/users', {
    body: { name: 'gina', mainAccount: 'shop1', password: 'gina-pass', instances: ['INS-2024-0001'] },
  });
  assert.equal(dashed.status, 201, JSON.stringify(dashed.body));
  assert.equal(none.status, 201, JSON.stringify(none.body));

  const carol = await through('carol', 'carol-pass');
  assert.equal(carol.http, 200, carol.httpBody);
  assert.equal(carol.httpBody, exit);
  assert.equal(carol.socksExit, 0);
  assert.equal(carol.socksBody, exit);
  for (const [user, password] of [
    ['dave', 'dave-pass'],
    ['erin', 'erin-pass'],
  ] as const) {
    const r = await through(user, password);
    assert.equal(r.http, 403, `${user}: ${r.http} ${r.httpBody}`);
    assert.match(r.httpBody, /may not use instance/);
    assert.equal(r.socksExit, 97, `${user}: SOCKS5 curl exit ${r.socksExit}`);
  }
  // A config user without the field keeps every running instance.
  const alice = await through('alice', 'alice-pass');
  assert.equal(alice.http, 200, alice.httpBody);

  const view = await gw.admin<{ instances: string[] | null }>('/v1/users/carol');
  assert.deepEqual(view.body.instances, [instanceNo]);
});

test('PATCH moves the instance from one customer to another at once; null gives every instance', async () => {
  assert.equal((await gw.admin(`/v1/users/dave`, { method: 'PATCH', body: { instances: [instanceNo] } })).status, 200);
  assert.equal((await gw.admin(`/v1/users/carol`, { method: 'PATCH', body: { instances: [] } })).status, 200);
  assert.equal((await through('dave', 'dave-pass')).http, 200);
  assert.equal((await through('carol', 'carol-pass')).http, 403);
  assert.equal((await gw.admin(`/v1/users/erin`, { method: 'PATCH', body: { instances: null } })).status, 200);
  assert.equal((await through('erin', 'erin-pass')).http, 200);
});

test('instances that are not instanceNos, or repeat one, are refused 400 naming the field', async () => {
  for (const instances of [['not an instance!'], ['INS-'], ['INS1', 'INS1'], 'INS1']) {
    const r = await gw.admin<{ error: { code: string; message: string } }>('/v1/users', {
      body: { name: 'frank', mainAccount: 'shop1', password: 'frank-pass', instances },
    });
    assert.equal(r.status, 400, `${JSON.stringify(instances)}: ${JSON.stringify(r.body)}`);
    assert.match(r.body.error.message, /instances/);
  }
});
