import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { startUpstreams } from '../../../src/sim/upstreams/index.ts';
import type { Upstreams } from '../../../src/sim/contracts.ts';
import { connectHead, curl, raw, startTarget, StubAuthority, type Target } from './helpers.ts';

async function fixture(t: { after(fn: () => Promise<void>): void }): Promise<{
  authority: StubAuthority;
  upstreams: Upstreams;
  target: Target;
}> {
  const authority = new StubAuthority();
  const upstreams = await startUpstreams({ authority, gatewayPorts: 1 });
  const target = await startTarget();
  t.after(async () => {
    await upstreams.close();
    await target.close();
  });
  return { authority, upstreams, target };
}

describe('whitelist ports', () => {
  test('admit a whitelisted address over SOCKS5 and HTTP, rotating the exit', async (t) => {
    const { authority, upstreams, target } = await fixture(t);
    authority.whitelisted.add('127.0.0.1');
    const port = await upstreams.whitelistPort('main1', 'P105');
    assert.equal(await upstreams.whitelistPort('main1', 'P105'), port, 'opened once, then reused');
    assert.notEqual(await upstreams.whitelistPort('main1', 'P104'), port);
    assert.ok(!upstreams.gatewayPorts.includes(port));

    const seen = new Set<string>();
    for (const args of [
      ['--socks5-hostname', `127.0.0.1:${port}`],
      ['-x', `http://127.0.0.1:${port}`],
      ['-p', '-x', `http://127.0.0.1:${port}`],
    ]) {
      const r = await curl([...args, target.url('/ip')]);
      assert.equal(r.code, 0, r.stderr);
      seen.add(r.stdout);
    }
    assert.equal(seen.size, 3, 'a new exit per connection');
    assert.deepEqual(authority.whitelistAsks[0], { account: 'main1', productNo: 'P105', clientIp: '127.0.0.1' });
    assert.ok(authority.used > 0, 'whitelist traffic is metered');
  });

  test('refuse an address that is not whitelisted: SOCKS5 not allowed, HTTP 403', async (t) => {
    const { authority, upstreams, target } = await fixture(t);
    const port = await upstreams.whitelistPort('main1', 'P105');
    const socks = await curl(['--socks5-hostname', `127.0.0.1:${port}`, target.url('/ip')]);
    assert.equal(socks.code, 97);
    assert.match(socks.stderr, /\(2\)/, 'reply 2: not allowed');
    const http = await curl(['-w', '\n%{http_code}', '-x', `http://127.0.0.1:${port}`, target.url('/ip')]);
    assert.equal(http.stdout, 'address not on the whitelist\n\n403');
    assert.equal(authority.used, 0);
  });
});

describe('instance endpoints', () => {
  test('check the instance credentials as they are now, on a fixed exit', async (t) => {
    const { authority, upstreams, target } = await fixture(t);
    authority.instanceCredentials.set('INS1', { username: 'u1', password: 'p1' });
    const port = await upstreams.instancePort('INS1');
    assert.equal(await upstreams.instancePort('INS1'), port);
    const proxy = `127.0.0.1:${port}`;

    const a = await curl(['--socks5-hostname', proxy, '--proxy-user', 'u1:p1', target.url('/ip')]);
    const b = await curl(['-x', `http://u1:p1@${proxy}`, target.url('/ip')]);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(b.stdout, a.stdout, 'one exit per instance');
    assert.ok(upstreams.exitAddresses.includes(a.stdout));

    authority.instanceCredentials.set('INS1', { username: 'u2', password: 'p2' });
    const old = await curl(['--socks5-hostname', proxy, '--proxy-user', 'u1:p1', target.url('/ip')]);
    assert.equal(old.code, 97);
    const oldHttp = await curl(['-o', '/dev/null', '-w', '%{http_code}', '-x', `http://u1:p1@${proxy}`, target.url('/ip')]);
    assert.equal(oldHttp.stdout, '407');
    const fresh = await curl(['-p', '-x', `http://u2:p2@${proxy}`, target.url('/ip')]);
    assert.equal(fresh.stdout, a.stdout);
  });

  test('closeInstance cuts live connections and closes the port', async (t) => {
    const { authority, upstreams, target } = await fixture(t);
    authority.instanceCredentials.set('INS2', { username: 'u', password: 'p' });
    const port = await upstreams.instancePort('INS2');
    const tunnel = raw(port, connectHead(`127.0.0.1:${target.port}`, 'u', 'p'));
    const [first] = (await once(tunnel.socket, 'data')) as [Buffer];
    assert.match(first.toString('latin1'), /^HTTP\/1\.1 200 /);

    await upstreams.closeInstance('INS2');
    const ended = await tunnel.received;
    assert.ok(tunnel.socket.destroyed, 'the live tunnel was cut');
    assert.ok(ended.data.length > 0);
    const after = raw(port, connectHead(`127.0.0.1:${target.port}`, 'u', 'p'));
    const refused = await after.received;
    assert.equal(refused.error?.code, 'ECONNREFUSED');
    await upstreams.closeInstance('INS2'); // a second close is harmless
  });
});
