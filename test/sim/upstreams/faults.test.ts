import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { startUpstreams } from '../../../src/sim/upstreams/index.ts';
import { clientAddress } from '../../../src/sim/upstreams/port.ts';
import type { Upstreams } from '../../../src/sim/contracts.ts';
import { connectHead, curl, raw, startTarget, StubAuthority, type Target } from './helpers.ts';

async function fixture(t: { after(fn: () => Promise<void>): void }): Promise<{
  authority: StubAuthority;
  upstreams: Upstreams;
  target: Target;
  user: string;
}> {
  const authority = new StubAuthority();
  const upstreams = await startUpstreams({ authority, gatewayPorts: 2, handshakeTimeoutMs: 1000 });
  const target = await startTarget();
  t.after(async () => {
    await upstreams.close();
    await target.close();
  });
  const user = upstreams.encodeUsername({ account: 'sub', productNo: 'P', sessionId: 's', sessTime: 5 });
  return { authority, upstreams, target, user };
}

describe('fault knobs', () => {
  test("'refuse' accepts and resets; null clears it", async (t) => {
    const { upstreams, target, user } = await fixture(t);
    const port = upstreams.gatewayPorts[0]!;
    upstreams.setFault(port, { mode: 'refuse' });
    const refused = await raw(port, Buffer.from([5, 1, 2])).received;
    assert.equal(refused.data.length, 0);
    assert.equal(refused.error?.code, 'ECONNRESET');
    const viaCurl = await curl(['--socks5-hostname', `127.0.0.1:${port}`, '--proxy-user', `${user}:secret`, target.url('/ip')]);
    assert.notEqual(viaCurl.code, 0);

    upstreams.setFault(port, null);
    const ok = await curl(['--socks5-hostname', `127.0.0.1:${port}`, '--proxy-user', `${user}:secret`, target.url('/ip')]);
    assert.equal(ok.code, 0, ok.stderr);
  });

  test("'stall' never answers, so the client's timeout fires", async (t) => {
    const { upstreams, target, user } = await fixture(t);
    const port = upstreams.gatewayPorts[0]!;
    upstreams.setFault(port, { mode: 'stall' });
    const started = Date.now();
    const r = await curl(['--max-time', '1', '-x', `http://${user}:secret@127.0.0.1:${port}`, target.url('/ip')]);
    assert.equal(r.code, 28, r.stderr);
    assert.ok(Date.now() - started >= 900);
    // stalled connections still belong to the upstreams: close() must end them
    const held = raw(port, 'GET / HTTP/1.1\r\n\r\n');
    await once(held.socket, 'connect');
    await upstreams.close();
    await held.received;
    assert.ok(held.socket.destroyed);
  });

  test("'reset' relays afterBytes bytes, then resets the client", async (t) => {
    const { authority, upstreams, target, user } = await fixture(t);
    const port = upstreams.gatewayPorts[0]!;
    upstreams.setFault(port, { mode: 'reset', afterBytes: 40_000 });
    const r = await curl(['-p', '-x', `http://${user}:secret@127.0.0.1:${port}`, target.url('/bytes/500000')]);
    assert.equal(r.code, 56, r.stderr);
    assert.match(r.stderr, /reset by peer/);
    assert.equal(authority.used, 40_000, 'exactly afterBytes were relayed, request head included');
    // the reset may drop what curl had not read yet, so only the bound is certain
    assert.ok(r.stdout.length < 40_000, String(r.stdout.length));

    upstreams.setFault(port, { mode: 'reset' });
    const before = authority.used;
    const socks = await curl(['--socks5-hostname', `127.0.0.1:${port}`, '--proxy-user', `${user}:secret`, target.url('/ip')]);
    assert.notEqual(socks.code, 0, 'afterBytes 0 resets as soon as the tunnel stands');
    assert.equal(authority.used, before);
  });

  test("'*' applies to every upstream port and a per-port fault wins over it", async (t) => {
    const { authority, upstreams, target, user } = await fixture(t);
    authority.whitelisted.add('127.0.0.1');
    const wl = await upstreams.whitelistPort('m', 'P');
    const [gw0, gw1] = upstreams.gatewayPorts as [number, number];
    upstreams.setFault('*', { mode: 'refuse' });
    upstreams.setFault(gw1, { mode: 'reset', afterBytes: 1_000_000 });
    for (const port of [gw0, wl]) {
      const r = await raw(port, 'CONNECT a:1 HTTP/1.1\r\n\r\n').received;
      assert.equal(r.error?.code, 'ECONNRESET', `port ${port}`);
    }
    const through = await curl(['-x', `http://${user}:secret@127.0.0.1:${gw1}`, target.url('/ip')]);
    assert.equal(through.code, 0, through.stderr);
    upstreams.setFault('*', null);
    const cleared = await curl(['-x', `http://127.0.0.1:${wl}`, target.url('/ip')]);
    assert.equal(cleared.code, 0, cleared.stderr);
  });
});

describe('robustness', () => {
  test('garbage on a gateway port never crashes it', async (t) => {
    const { upstreams, target, user } = await fixture(t);
    const port = upstreams.gatewayPorts[0]!;
    const payloads: Buffer[] = [Buffer.from([5]), Buffer.from([5, 0]), Buffer.from([5, 255, 1]), Buffer.from([5, 1, 2, 1, 0, 0])];
    for (let i = 0; i < 40; i++) {
      const bytes = randomBytes(1 + ((i * 97) % 3000));
      if (i % 2 === 0) bytes[0] = 5;
      payloads.push(bytes);
    }
    const runs = payloads.map(async (payload) => {
      const exchange = raw(port, payload);
      const timer = setTimeout(() => exchange.socket.destroy(), 3000);
      await exchange.received;
      clearTimeout(timer);
    });
    await Promise.all(runs);

    const huge = await raw(port, `GET http://a/ HTTP/1.1\r\nX: ${'y'.repeat(20_000)}\r\n\r\n`).received;
    assert.match(huge.data.toString('latin1'), /^HTTP\/1\.1 431 /);
    const junk = await raw(port, 'hello there\r\n\r\n').received;
    assert.match(junk.data.toString('latin1'), /^HTTP\/1\.1 400 /);
    const originForm = await raw(port, 'GET / HTTP/1.1\r\nHost: a\r\n\r\n').received;
    assert.match(originForm.data.toString('latin1'), /^HTTP\/1\.1 400 /);
    const silent = await raw(port, 'GET http://a/ HTTP/1.1\r\n').received;
    assert.match(silent.data.toString('latin1'), /^HTTP\/1\.1 408 /, 'an unfinished head times out');

    const ok = await curl(['--socks5-hostname', `127.0.0.1:${port}`, '--proxy-user', `${user}:secret`, target.url('/ip')]);
    assert.equal(ok.code, 0, ok.stderr);
  });

  test('close() ends listeners and live tunnels', async (t) => {
    const { upstreams, target, user } = await fixture(t);
    const port = upstreams.gatewayPorts[0]!;
    const tunnel = raw(port, connectHead(`127.0.0.1:${target.port}`, user, 'secret'));
    await once(tunnel.socket, 'data');
    await upstreams.close();
    await tunnel.received;
    const after = await raw(port).received;
    assert.equal(after.error?.code, 'ECONNREFUSED');
    await assert.rejects(upstreams.whitelistPort('a', 'b'), { code: 'UPSTREAM_CLOSED' });
  });

  test('an IPv4-mapped client address is reported as plain IPv4', () => {
    assert.equal(clientAddress({ remoteAddress: '::ffff:127.0.0.1' } as Socket), '127.0.0.1');
    assert.equal(clientAddress({ remoteAddress: '::1' } as Socket), '::1');
  });
});
