import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startUpstreams } from '../../../src/sim/upstreams/index.ts';
import type { DrawnCredential, Upstreams } from '../../../src/sim/contracts.ts';
import { connectHead, curl, raw, startTarget, StubAuthority, type Target } from './helpers.ts';

interface Fixture {
  authority: StubAuthority;
  upstreams: Upstreams;
  target: Target;
  clock: { now: number };
  gw: string;
}

async function fixture(t: { after(fn: () => Promise<void>): void }): Promise<Fixture> {
  const authority = new StubAuthority();
  const clock = { now: 1_700_000_000_000 };
  const upstreams = await startUpstreams({ authority, gatewayPorts: 2, now: () => clock.now });
  const target = await startTarget();
  t.after(async () => {
    await upstreams.close();
    await target.close();
  });
  return { authority, upstreams, target, clock, gw: `127.0.0.1:${upstreams.gatewayPorts[0]}` };
}

const credential = (over: Partial<DrawnCredential> = {}): DrawnCredential => ({
  account: 'sub1',
  productNo: 'P104',
  sessionId: 's1',
  sessTime: 5,
  ...over,
});

describe('password gateway', () => {
  test('listens on the asked number of ports and reports its exits', async (t) => {
    const { upstreams } = await fixture(t);
    assert.equal(upstreams.gatewayPorts.length, 2);
    assert.equal(upstreams.host, '127.0.0.1');
    assert.deepEqual(
      upstreams.exitAddresses,
      Array.from({ length: 8 }, (_, i) => `127.0.0.${2 + i}`),
    );
  });

  test('curl reaches the target through SOCKS5, HTTP forwarding and HTTP CONNECT', async (t) => {
    const { authority, upstreams, target, gw } = await fixture(t);
    const user = upstreams.encodeUsername(credential());
    const socks = await curl(['--socks5-hostname', gw, '--proxy-user', `${user}:secret`, target.url('/ip')]);
    assert.equal(socks.code, 0, socks.stderr);
    assert.ok(upstreams.exitAddresses.includes(socks.stdout), socks.stdout);
    assert.deepEqual(authority.credentialsSeen[0], credential());

    const second = `127.0.0.1:${upstreams.gatewayPorts[1]}`;
    const http = await curl(['-x', `http://${user}:secret@${second}`, target.url('/ip')]);
    assert.equal(http.code, 0, http.stderr);
    assert.equal(http.stdout, socks.stdout, 'the same session keeps its exit on every gateway port');

    const tunnel = await curl(['-p', '-x', `http://${user}:secret@${gw}`, target.url('/bytes/3000')]);
    assert.equal(tunnel.code, 0, tunnel.stderr);
    assert.equal(tunnel.stdout, 'a'.repeat(3000));
  });

  test('a sticky session keeps its exit for sessTime minutes, then moves', async (t) => {
    const { upstreams, target, gw, clock } = await fixture(t);
    const user = upstreams.encodeUsername(credential({ sessionId: 'sticky', sessTime: 10 }));
    const via = async (): Promise<string> => {
      const r = await curl(['--socks5-hostname', gw, '--proxy-user', `${user}:secret`, target.url('/ip')]);
      assert.equal(r.code, 0, r.stderr);
      return r.stdout;
    };
    const first = await via();
    clock.now += 9 * 60_000;
    assert.equal(await via(), first);
    assert.equal(await via(), first);
    clock.now += 60_000;
    const moved = await via();
    assert.notEqual(moved, first);
    clock.now += 5 * 60_000;
    assert.equal(await via(), moved, 'the new exit holds for a new sessTime window');
  });

  test('sessTime 0 and -1 rotate the exit on every connection', async (t) => {
    const { upstreams, target, gw } = await fixture(t);
    for (const sessTime of [0, -1]) {
      const user = upstreams.encodeUsername(credential({ sessionId: `rot${sessTime}`, sessTime }));
      const seen = new Set<string>();
      for (let i = 0; i < 3; i++) {
        const r = await curl(['-x', `http://${user}:secret@${gw}`, target.url('/ip')]);
        assert.equal(r.code, 0, r.stderr);
        seen.add(r.stdout);
      }
      assert.equal(seen.size, 3);
    }
  });

  test('wrong or missing credentials: SOCKS5 auth failure, HTTP 407', async (t) => {
    const { upstreams, target, gw } = await fixture(t);
    const user = upstreams.encodeUsername(credential());
    const socks = await curl(['--socks5-hostname', gw, '--proxy-user', `${user}:nope`, target.url('/ip')]);
    assert.equal(socks.code, 97, socks.stderr);
    assert.match(socks.stderr, /rejected by the SOCKS5 server/);
    const notOurs = await curl(['--socks5-hostname', gw, '--proxy-user', 'someone:secret', target.url('/ip')]);
    assert.equal(notOurs.code, 97);

    const http = await curl(['-o', '/dev/null', '-w', '%{http_code}', '-x', `http://${user}:nope@${gw}`, target.url('/ip')]);
    assert.equal(http.stdout, '407');
    const missing = raw(upstreams.gatewayPorts[0]!, connectHead(`127.0.0.1:${target.port}`));
    const answer = (await missing.received).data.toString('latin1');
    assert.match(answer, /^HTTP\/1\.1 407 /);
    assert.match(answer, /\r\nProxy-Authenticate: Basic realm="rotor-sim"\r\n/);
  });

  test('a refusal for balance or a disabled account is HTTP 403 with the reason', async (t) => {
    const { authority, upstreams, target, gw } = await fixture(t);
    authority.disabled = true;
    const user = upstreams.encodeUsername(credential());
    const r = await curl(['-w', '\n%{http_code}', '-x', `http://${user}:secret@${gw}`, target.url('/ip')]);
    assert.equal(r.stdout, 'account disabled\n\n403');
    const socks = await curl(['--socks5-hostname', gw, '--proxy-user', `${user}:secret`, target.url('/ip')]);
    assert.equal(socks.code, 97);
  });

  test('a refused target: SOCKS5 reply 5, HTTP 502', async (t) => {
    const { upstreams, target, gw } = await fixture(t);
    const closedPort = target.port;
    await target.close();
    const user = upstreams.encodeUsername(credential());
    const socks = await curl(['--socks5-hostname', gw, '--proxy-user', `${user}:secret`, `http://127.0.0.1:${closedPort}/`]);
    assert.equal(socks.code, 97);
    assert.match(socks.stderr, /SOCKS5 connection .*\(5\)/, 'reply 5: connection refused');
    const http = await curl([
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      '-x',
      `http://${user}:secret@${gw}`,
      `http://127.0.0.1:${closedPort}/`,
    ]);
    assert.equal(http.stdout, '502');
  });

  test('every relayed byte is metered', async (t) => {
    const { authority, upstreams, target, gw } = await fixture(t);
    const user = upstreams.encodeUsername(credential());
    const r = await curl(['--socks5-hostname', gw, '--proxy-user', `${user}:secret`, target.url('/bytes/200000')]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.length, 200_000);
    // body plus the request and response heads, nothing more
    assert.ok(authority.used > 200_000 && authority.used < 200_000 + 1000, String(authority.used));

    const before = authority.used;
    const upload = 'x'.repeat(50_000);
    const post = await curl(['-x', `http://${user}:secret@${gw}`, '--data-binary', upload, target.url('/ip')]);
    assert.equal(post.code, 0, post.stderr);
    const counted = authority.used - before;
    assert.ok(counted > 50_000 && counted < 50_000 + 1000, String(counted));
  });

  test('an exhausted meter cuts a running download and refuses the next connection', async (t) => {
    const { authority, upstreams, target, gw } = await fixture(t);
    authority.allowance = 1_000_000;
    const user = upstreams.encodeUsername(credential());
    const r = await curl(['-p', '-x', `http://${user}:secret@${gw}`, target.url('/stream/50000000')]);
    assert.notEqual(r.code, 0);
    assert.ok(r.stdout.length < 1_000_000, String(r.stdout.length));
    assert.ok(r.stdout.length > 100_000, 'the download ran before it was cut');
    const next = await curl(['-o', '/dev/null', '-w', '%{http_code}', '-x', `http://${user}:secret@${gw}`, target.url('/ip')]);
    assert.equal(next.stdout, '403');
  });
});
