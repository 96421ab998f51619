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
    assert.ok((b.begin('Alice', '10.0.0.2') as number) > 0, 'the name counts its tries in flight from every address');
    assert.equal(b.begin('bob', '10.0.0.1'), 0, 'another name from that address: its own free tries (the address has 12)');
    b.end('bob', '10.0.0.1', 'unchecked');
    b.end('alice', '10.0.0.1', 'failed');
    assert.ok((b.begin('alice', '10.0.0.1') as number) > 0, 'two free failures left, both in flight');
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
    // One address: 12 tries in flight at most, whatever the names; the others wait in the address's line.
    const spray = Array.from({ length: 14 }, (_, i) => b.begin(`user${i}`, '10.9.9.9'));
    assert.equal(spray.filter((w) => w === 0).length, 12);
    assert.equal(b.waitingInLine, 2);
  });

  test("past an address's checks in flight a try waits in line: a right password lets the next be checked, failures refuse the line", async () => {
    const b = new LoginBackoff({ freeFailures: 3, maxDelayMs: 4000, now: () => 0 });
    const office = '10.1.1.1';
    // An office behind one NAT: 12 sign-ins in flight, then two more for other names wait (not refused).
    const first = Array.from({ length: 12 }, (_, i) => b.begin(`staff${i}`, office));
    assert.deepEqual(first, Array(12).fill(0));
    const thirteenth = b.begin('staff12', office);
    const fourteenth = b.begin('staff13', office);
    assert.ok(thirteenth instanceof Promise && fourteenth instanceof Promise, 'waiting, not refused');
    // A name whose own tries are all in flight (here two more from elsewhere) is refused at once, line or no line.
    assert.deepEqual([b.begin('staff0', '10.3.3.3'), b.begin('staff0', '10.3.3.3')], [0, 0]);
    assert.equal(b.begin('staff0', office), 1000);
    b.end('staff0', '10.3.3.3', 'unchecked');
    b.end('staff0', '10.3.3.3', 'unchecked');
    // Two right passwords end: the two waiting are reserved, in order.
    b.end('staff0', office, 'succeeded');
    assert.equal(await thirteenth, 0);
    b.end('staff1', office, 'succeeded');
    assert.equal(await fourteenth, 0);
    assert.equal(b.waitingInLine, 0);
    // A guessing burst over many names from the same address: 12 in flight, the rest in line.
    for (let i = 2; i < 14; i++) b.end(`staff${i}`, office, 'succeeded');
    const guesses = Array.from({ length: 40 }, (_, i) => b.begin(`name${i}`, office));
    const line = guesses.filter((g) => g instanceof Promise);
    assert.equal(guesses.filter((g) => g === 0).length, 12);
    assert.equal(line.length, 28);
    // Wrong passwords end one by one: each frees a place for the next only while the address has failures left.
    let checked = 12;
    for (let i = 0; i < 12; i++) b.end(`name${i}`, office, 'failed');
    const outcomes = await Promise.all(line);
    checked += outcomes.filter((o) => o === 0).length;
    assert.equal(
      outcomes.filter((o) => o === 0).length,
      0,
      `the line was checked past the address's 12 free failures: ${JSON.stringify(outcomes)}`,
    );
    assert.ok(
      outcomes.every((o) => o >= 1000),
      'the line is refused with the address wait',
    );
    assert.equal(checked, 12);
    assert.ok(b.waitMs('someone', office) > 0, 'the address waits: 12 failures');
  });

  test('the line is bounded per address and waits at most maxLineWaitMs', async () => {
    const b = new LoginBackoff({ freeFailures: 3, maxDelayMs: 4000, maxLineWaitMs: 50 });
    const held = Array.from({ length: 12 + 64 + 3 }, (_, i) => b.begin(`u${i}`, '10.2.2.2'));
    assert.equal(held.filter((h) => h === 0).length, 12);
    assert.equal(held.filter((h) => h instanceof Promise).length, 64);
    assert.deepEqual(held.slice(12 + 64), [1000, 1000, 1000], 'past 64 in line: refused at once');
    // Nothing ends in time: the line is refused after its longest wait, unchecked.
    const waited = await Promise.all(held.filter((h) => h instanceof Promise));
    assert.ok(waited.every((w) => w === 1000));
    assert.equal(b.waitingInLine, 0);
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
