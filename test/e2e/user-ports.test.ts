// A dedicated port per user (issue 15 item 5), end to end with real clients: HTTP (absolute URI and CONNECT)
// and SOCKS5 on one port, told apart by the first byte; a client from `allowIps` needs no credentials and is
// served as that user; others must authenticate (with user-name options) as on the shared listeners; rules
// still apply; a reload opens, moves and closes ports live.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { curl, nodeHttpGet, startGateway, startTarget, testConfig, type Gateway, type Target } from './harness.ts';

const ALICE = { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: ['127.0.0.1/32'] } };
// Loopback clients are not in bob's allowIps: his port wants credentials.
const BOB = { name: 'bob', password: 'bob-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: ['10.0.0.0/8'] } };

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });
}

describe('user ports', () => {
  let gw: Gateway;
  let target: Target;
  let alicePort: number;
  let bobPort: number;

  before(async () => {
    gw = await startGateway({ config: { users: [ALICE, BOB] } });
    target = await startTarget();
    alicePort = gw.daemon.userPorts.portOf('alice')!;
    bobPort = gw.daemon.userPorts.portOf('bob')!;
    assert.ok(alicePort > 0 && bobPort > 0 && alicePort !== bobPort);
  });
  after(async () => {
    await target.close();
    await gw.close();
  });

  test('an allowed address needs no credentials: absolute URI, CONNECT and socks5h on the one port', async () => {
    for (const args of [
      ['-x', `http://127.0.0.1:${alicePort}`],
      ['-p', '-x', `http://127.0.0.1:${alicePort}`],
      ['-x', `socks5h://127.0.0.1:${alicePort}`],
      ['-x', `socks5://127.0.0.1:${alicePort}`],
    ]) {
      const r = await curl([...args, target.url()]);
      assert.equal(r.exitCode, 0, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.status, 200);
      assert.ok(gw.exits.includes(r.body), `${args.join(' ')} left through an upstream exit, got ${r.body}`);
    }
    const node = await nodeHttpGet(alicePort, undefined, '', target.url());
    assert.equal(node.status, 200);
    const active = await gw.admin<Array<{ name: string; usedBytes: number }>>('/v1/users');
    assert.ok(active.body.find((u) => u.name === 'alice')!.usedBytes > 0, 'counted as alice');
  });

  test('credentials with user-name options are still accepted there (a sticky session keeps its exit)', async () => {
    const a = await curl(['-x', `socks5h://alice-session-s1:alice-pass@127.0.0.1:${alicePort}`, target.url()]);
    const b = await curl(['-x', `http://alice-session-s1:alice-pass@127.0.0.1:${alicePort}`, target.url()]);
    assert.equal(a.exitCode, 0, a.stderr);
    assert.equal(b.exitCode, 0, b.stderr);
    assert.equal(a.body, b.body, 'same session, same exit, whichever protocol');
  });

  test('an address outside allowIps must authenticate', async () => {
    const http = await curl(['-x', `http://127.0.0.1:${bobPort}`, target.url()]);
    assert.equal(http.status, 407);
    const connectNoAuth = await curl(['-p', '-x', `http://127.0.0.1:${bobPort}`, target.url()]);
    assert.notEqual(connectNoAuth.exitCode, 0);
    assert.match(connectNoAuth.stderr, /407/);
    const socks = await curl(['-x', `socks5h://127.0.0.1:${bobPort}`, target.url()]);
    assert.equal(socks.exitCode, 97, socks.stderr);
    const withAuth = await curl(['-x', `socks5h://bob:bob-pass@127.0.0.1:${bobPort}`, target.url()]);
    assert.equal(withAuth.exitCode, 0, withAuth.stderr);
    assert.ok(gw.exits.includes(withAuth.body));
    const wrong = await curl(['-x', `http://bob:nope@127.0.0.1:${bobPort}`, target.url()]);
    assert.equal(wrong.status, 407);
    // The shared listeners never admit without credentials, whatever the address.
    assert.equal((await curl(['-x', `http://127.0.0.1:${gw.ports.http}`, target.url()])).status, 407);
    assert.equal((await curl(['-x', `socks5h://127.0.0.1:${gw.ports.socks5}`, target.url()])).exitCode, 97);
  });

  test('destination rules hold on a user port', async () => {
    const r = await curl(['-x', `http://127.0.0.1:${alicePort}`, 'http://127.0.0.1:25/']);
    assert.equal(r.status, 403);
    const s = await curl(['-x', `socks5h://127.0.0.1:${alicePort}`, 'http://127.0.0.1:25/']);
    assert.equal(s.exitCode, 97);
  });

  test('a reload closes, opens and re-scopes ports live', async () => {
    const next = testConfig({
      users: [
        { ...ALICE, listen: null },
        { ...BOB, listen: { port: 0, allowIps: ['127.0.0.0/8'] } },
      ],
    });
    await gw.daemon.reload(next);
    assert.equal(gw.daemon.userPorts.portOf('alice'), undefined);
    assert.ok(await refused(alicePort), "alice's port is closed");
    assert.equal(gw.daemon.userPorts.portOf('bob'), bobPort, 'same port, new allowIps');
    const bobNow = await curl(['-x', `socks5h://127.0.0.1:${bobPort}`, target.url()]);
    assert.equal(bobNow.exitCode, 0, bobNow.stderr);
    await gw.daemon.reload(testConfig({ users: [ALICE, BOB] }));
    const reopened = gw.daemon.userPorts.portOf('alice')!;
    const r = await curl(['-x', `http://127.0.0.1:${reopened}`, target.url()]);
    assert.equal(r.status, 200);
  });
});
