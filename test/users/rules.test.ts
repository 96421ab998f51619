// Destination rules: the matching semantics of src/users/rules.ts and the CIDR set behind them.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CidrSet, CidrError } from '../../src/proxy/cidr.ts';
import { DestinationPolicy, isHostEntry, rulesSchema } from '../../src/proxy/destination-rules.ts';

describe('CidrSet', () => {
  test('IPv4 and IPv6 ranges, bare addresses, mapped and shorthand spellings', () => {
    const set = new CidrSet(['10.0.0.0/8', '192.168.1.7', '2001:db8::/32', '::1']);
    assert.equal(set.has('10.200.3.4'), true);
    assert.equal(set.has('11.0.0.1'), false);
    assert.equal(set.has('192.168.1.7'), true);
    assert.equal(set.has('192.168.1.8'), false);
    assert.equal(set.has('2001:db8:1::5'), true);
    assert.equal(set.has('[::1]'), true);
    assert.equal(set.has('2001:db9::1'), false);
    assert.equal(set.has('::ffff:10.1.2.3'), true, 'IPv4-mapped IPv6 is the IPv4 address');
    assert.equal(set.has('10.1'), true, 'inet_aton shorthand 10.1 = 10.0.0.1');
    assert.equal(set.has('0x0a000001'), true, 'hex spelling');
    assert.equal(set.has('example.com'), false);
  });
  test('refuses what is no range', () => {
    for (const bad of ['10.0.0.0/33', 'x.y', '10.0.0.0/', '::/129', '1.2.3.4/abc']) {
      assert.throws(() => new CidrSet([bad]), CidrError, bad);
      assert.equal(CidrSet.isValid(bad), false);
    }
    assert.equal(CidrSet.isValid('0.0.0.0/0'), true);
    assert.equal(new CidrSet(['0.0.0.0/0']).has('8.8.8.8'), true);
  });
});

describe('DestinationPolicy', () => {
  const t = (host: string, port = 443) => ({ host, port });

  test('loopback rules catch every spelling of the local host: unspecified, the other family, mapped, NAT64, localhost', () => {
    for (const rules of [{ denyHosts: ['127.0.0.0/8'] }, { denyHosts: ['::1'] }, { denyHosts: ['127.0.0.1', '::1'] }]) {
      const p = new DestinationPolicy({});
      const u = { rules };
      for (const host of [
        '0.0.0.0',
        '0x0',
        '::',
        '[::]',
        '::0',
        '0:0:0:0:0:0:0:0',
        '::ffff:0.0.0.0',
        '::ffff:127.0.0.1',
        '[::ffff:7f00:1]',
        '127.1',
        '0x7f.1',
        '2130706433',
        '0177.0.0.1',
        '127.0.0.2',
        '::1',
        '[0:0:0:0:0:0:0:1]',
        '64:ff9b::7f00:1',
        'localhost',
        'LOCALHOST.',
        'a.localhost',
      ]) {
        assert.match(p.check(u, t(host)) ?? '', /is not allowed/, `${JSON.stringify(rules)}: ${host}`);
      }
      // Other hosts pass.
      for (const host of ['192.0.2.1', '2001:db8::1', '64:ff9b::c000:201', 'example.com', 'localhost.example.com'])
        assert.equal(p.check(u, t(host)), undefined, host);
    }
    // An allow list with a loopback entry admits the local host's other spellings, and nothing else.
    const allow = new DestinationPolicy({});
    assert.equal(allow.check({ rules: { allowHosts: ['127.0.0.1'] } }, t('[::]')), undefined);
    assert.match(allow.check({ rules: { allowHosts: ['127.0.0.1'] } }, t('192.0.2.1')) ?? '', /not allowed/);
  });

  test('global deny port and host patterns', () => {
    const p = new DestinationPolicy({ denyPorts: [25], denyHosts: ['*.blocked.test', 'exact.test', '.both.test'] });
    const u = {};
    assert.match(p.check(u, t('mail.example.com', 25)) ?? '', /port 25 is not allowed/);
    assert.equal(p.check(u, t('example.com', 587)), undefined);
    assert.match(p.check(u, t('a.blocked.test')) ?? '', /host a\.blocked\.test is not allowed/);
    assert.match(p.check(u, t('A.B.BLOCKED.TEST.')) ?? '', /not allowed/, 'case and trailing dot ignored');
    assert.equal(p.check(u, t('blocked.test')), undefined, '*.name does not match the name itself');
    assert.equal(p.check(u, t('notblocked.test')), undefined);
    assert.ok(p.check(u, t('exact.test')));
    assert.equal(p.check(u, t('sub.exact.test')), undefined);
    assert.ok(p.check(u, t('both.test')));
    assert.ok(p.check(u, t('x.both.test')));
  });

  test('allow lists: non-empty means only those', () => {
    const p = new DestinationPolicy();
    const user = { rules: { allowPorts: [80, 443], allowHosts: ['*.good.test', '10.0.0.0/8'] } };
    assert.equal(p.check(user, t('a.good.test', 443)), undefined);
    assert.match(p.check(user, t('a.good.test', 8080)) ?? '', /port 8080/);
    assert.match(p.check(user, t('evil.test', 80)) ?? '', /host evil\.test/);
    assert.equal(p.check(user, t('10.9.9.9', 80)), undefined);
    assert.ok(p.check(user, t('11.0.0.1', 80)));
    assert.ok(p.check(user, t('[2001:db8::1]', 80)));
  });

  test('user rules add to the defaults; a user allow never reopens a global deny', () => {
    const p = new DestinationPolicy({ denyPorts: [25] });
    const user = { rules: { allowPorts: [25, 80], denyHosts: ['192.168.0.0/16'] } };
    assert.ok(p.check(user, t('smtp.test', 25)));
    assert.equal(p.check(user, t('ok.test', 80)), undefined);
    assert.ok(p.check(user, t('192.168.3.4', 80)));
    assert.equal(p.check({ rules: null }, t('192.168.3.4', 80)), undefined);
    p.setDefaults({});
    assert.equal(p.check(user, t('smtp.test', 25)), undefined, 'after a reload without the global deny');
  });

  test('a replaced rules object is compiled anew; the same object is compiled once', () => {
    const p = new DestinationPolicy();
    const user: { rules: { denyPorts: number[] } } = { rules: { denyPorts: [22] } };
    assert.ok(p.check(user, t('h', 22)));
    user.rules = { denyPorts: [23] };
    assert.equal(p.check(user, t('h', 22)), undefined);
    assert.ok(p.check(user, t('h', 23)));
  });

  test('the schema names what is wrong', () => {
    assert.equal(isHostEntry('*.example.com'), true);
    assert.equal(isHostEntry('exa mple.com'), false);
    const r = rulesSchema.safeParse({ denyPorts: [70000], denyHosts: ['*.ok.test', 'bad host'] });
    assert.equal(r.success, false);
    const paths = r.error!.issues.map((i) => i.path.join('.'));
    assert.deepEqual(paths.sort(), ['denyHosts.1', 'denyPorts.0']);
    assert.deepEqual(rulesSchema.parse({}), { denyPorts: [], denyHosts: [], allowPorts: [], allowHosts: [] });
  });
});
