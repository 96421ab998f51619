// The portal's pieces on their own: the session table's expiries and bounds, the wrong-password back-off's
// doubling and its separate tables, the endpoint lines' spelling (user-name options, IPv6 hosts, quoting).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LoginBackoff } from '../../src/portal/backoff.ts';
import { buildEndpoints, renderEndpoints } from '../../src/portal/endpoints.ts';
import { checkPassword } from '../../src/portal/credentials.ts';
import { PortalSessions, csrfMatches } from '../../src/portal/sessions.ts';
import { hashPasswordAsync } from '../../src/admission/password.ts';

describe('portal sessions', () => {
  test('idle and absolute expiry; a forged or malformed token finds nothing', () => {
    let now = 1_000_000;
    const s = new PortalSessions({ idleMs: 1000, maxAgeMs: 5000, now: () => now });
    const { token, session } = s.create('a', 'pw');
    assert.equal(s.get(token), session);
    assert.equal(s.get(token.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'))), undefined);
    assert.equal(s.get('short'), undefined);
    assert.equal(s.get(undefined), undefined);
    now += 900;
    assert.equal(s.get(token), session, 'within the idle time');
    now += 900;
    assert.equal(s.get(token), session, 'the idle clock restarted at the last use');
    now += 1001;
    assert.equal(s.get(token), undefined, 'idle too long');
    const second = s.create('a', 'pw');
    for (let i = 0; i < 6; i++) {
      now += 900;
      s.get(second.token);
    }
    assert.equal(s.get(second.token), undefined, 'past the absolute age however busy');
  });

  test('bounded: per user and in all, oldest first; a password change ends the others', () => {
    const s = new PortalSessions({ idleMs: 60_000, maxAgeMs: 60_000, perUser: 3, maxSessions: 5 });
    const a = [1, 2, 3, 4].map(() => s.create('a', 'pw'));
    assert.equal(s.get(a[0]!.token), undefined, "the oldest of a's four went");
    assert.ok(a.slice(1).every((x) => s.get(x.token)));
    const b = [1, 2, 3].map(() => s.create('b', 'pw'));
    assert.equal(s.size, 5);
    assert.equal(s.get(a[1]!.token), undefined, 'the oldest in all went');
    s.dropUser('b', b[2]!.session);
    assert.equal(s.get(b[0]!.token), undefined);
    assert.equal(s.get(b[2]!.token), b[2]!.session);
    assert.ok(csrfMatches(b[2]!.session.csrf, b[2]!.session));
    assert.ok(!csrfMatches(a[3]!.session.csrf, b[2]!.session));
    assert.ok(!csrfMatches(undefined, b[2]!.session));
  });
});

describe('wrong-password back-off', () => {
  test('free tries, then 1 s doubling up to the cap; a right password clears the name; the address has its own count', () => {
    let now = 0;
    const b = new LoginBackoff({ freeFailures: 3, maxDelayMs: 4000, now: () => now });
    for (let i = 0; i < 2; i++) b.failed('Alice', '10.0.0.1');
    assert.equal(b.waitMs('alice', '10.0.0.1'), 0);
    b.failed('alice', '10.0.0.1');
    assert.equal(b.waitMs('alice', '10.0.0.2'), 1000, 'the name waits from any address');
    now += 1000;
    b.failed('alice', '10.0.0.1');
    assert.equal(b.waitMs('alice', '10.0.0.2'), 2000);
    now += 2000;
    b.failed('alice', '10.0.0.1');
    now += 4000;
    b.failed('alice', '10.0.0.1');
    assert.equal(b.waitMs('alice', '10.0.0.2'), 4000, 'capped');
    assert.equal(b.waitMs('bob', '10.0.0.2'), 0, 'another name from another address does not wait');
    b.succeeded('alice');
    now += 4000;
    assert.equal(b.waitMs('alice', '10.0.0.2'), 0);
    // One address spraying many names: 12 free tries (4 × 3), then it waits whatever the name.
    for (let i = 0; i < 12; i++) b.failed(`user${i}`, '10.9.9.9');
    assert.ok(b.waitMs('fresh', '10.9.9.9') > 0);
    assert.equal(b.waitMs('fresh', '10.9.9.8'), 0);
  });
});

describe('wrong-password back-off: tries in flight', () => {
  test('a try is reserved before its check: tries at once get the free failures left, then one at a time after the wait', () => {
    let now = 0;
    const b = new LoginBackoff({ freeFailures: 3, maxDelayMs: 4000, now: () => now });
    assert.deepEqual(
      [1, 2, 3, 4, 5].map(() => b.begin('alice', '10.0.0.1')),
      [0, 0, 0, 1000, 1000],
      'three free tries in flight at once, the fourth refused unchecked',
    );
    assert.ok(b.begin('Alice', '10.0.0.2') > 0, 'the name counts its tries in flight from every address');
    assert.equal(b.begin('bob', '10.0.0.1'), 0, 'another name from that address: its own free tries (the address has 12)');
    b.end('bob', '10.0.0.1', 'unchecked');
    b.end('alice', '10.0.0.1', 'failed');
    assert.ok(b.begin('alice', '10.0.0.1') > 0, 'two free failures left, both in flight');
    b.end('alice', '10.0.0.1', 'failed');
    b.end('alice', '10.0.0.1', 'failed');
    assert.equal(b.waitMs('alice', '10.0.0.1'), 1000, 'three failures: the wait starts');
    assert.equal(b.begin('alice', '10.0.0.1'), 1000);
    now += 1000;
    assert.deepEqual([b.begin('alice', '10.0.0.1'), b.begin('alice', '10.0.0.1')], [0, 1000], 'after the wait: one try at a time');
    b.end('alice', '10.0.0.1', 'unchecked');
    assert.equal(b.begin('alice', '10.0.0.1'), 0, 'a try not checked (shed) gives its place back without a failure');
    b.end('alice', '10.0.0.1', 'succeeded');
    assert.deepEqual(
      [1, 2, 3].map(() => b.begin('alice', '10.0.0.1')),
      [0, 0, 0],
      'a right password clears the name',
    );
    // One address: 12 tries in flight at most, whatever the names.
    const spray = Array.from({ length: 14 }, (_, i) => b.begin(`user${i}`, '10.9.9.9'));
    assert.equal(spray.filter((w) => w === 0).length, 12);
  });
});

describe('password check', () => {
  test("the proxy's scrypt hashes, off the event loop; unknown users and malformed hashes are false", async () => {
    const hash = await hashPasswordAsync('right-pass');
    assert.equal(await checkPassword('right-pass', hash), true);
    assert.equal(await checkPassword('wrong-pass', hash), false);
    assert.equal(await checkPassword('right-pass', undefined), false);
    assert.equal(await checkPassword('right-pass', 'scrypt$x$y'), false);
  });
});

describe('endpoint lines', () => {
  test('options in the user name; every format; IPv6 bracketed; quotes escaped in the shell and Python lines', () => {
    let n = 0;
    const ids = () => `id${++n}`;
    const [e] = buildEndpoints(
      'alice',
      "p'w:@",
      { host: '::1', port: 8080 },
      { protocol: 'socks5', sessions: 1, sessTime: 30, region: 'US' },
      ids,
      'https://example.com/',
    );
    assert.ok(e);
    assert.equal(e.username, 'alice-session-id1-sesstime-30-region-US');
    assert.equal(e.url, "socks5://alice-session-id1-sesstime-30-region-US:p'w%3A%40@[::1]:8080");
    assert.equal(e.hostport, "[::1]:8080:alice-session-id1-sesstime-30-region-US:p'w:@");
    assert.equal(e.curl, "curl -x 'socks5h://alice-session-id1-sesstime-30-region-US:p'\\''w%3A%40@[::1]:8080' https://example.com/");
    assert.match(e.python, /proxies=\{'http': 'socks5h:\/\/alice-session-id1-sesstime-30-region-US:p\\'w%3A%40@\[::1\]:8080'/);
    const rotating = buildEndpoints('bob', 'pw', { host: '127.0.0.1', port: 1 }, { protocol: 'http', sessions: 0, sessTime: 10 });
    assert.equal(rotating.length, 1);
    assert.equal(rotating[0]!.username, 'bob', 'no session: no sesstime either');
    const csv = renderEndpoints(buildEndpoints('c', 'a,"b', { host: 'h', port: 2 }, { protocol: 'http', sessions: 2 }, ids), 'csv', 'url');
    const rows = csv.split('\r\n');
    assert.equal(rows[0], 'protocol,host,port,username,password,session,url');
    assert.match(rows[1]!, /^http,h,2,c-session-id2,"a,""b",id2,/);
    assert.equal(renderEndpoints(rotating, 'txt', 'hostport'), '127.0.0.1:1:bob:pw\n');
  });
});
