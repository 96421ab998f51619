// SOCKS5 UDP ASSOCIATE (RFC 1928 §7) through Rotor and the sandbox's SOCKS5 upstreams (which relay UDP from
// their exit addresses), with a SOCKS5 UDP client written here: datagrams to a loopback UDP echo all come
// back, a sticky session's datagrams leave from its TCP exit, bytes are metered, a quota cut stops the
// datagrams, the association dies with its control connection, an upstream without UDP gives 0x07, and
// fuzzed headers never crash the daemon.
import assert from 'node:assert/strict';
import { createSocket, type RemoteInfo, type Socket as UdpSocket } from 'node:dgram';
import { after, before, describe, test } from 'node:test';
import { udpHeader } from '../../src/wire/socks5-udp.ts';
import { associate } from '../support/socks5-udp.ts';
import { poll } from '../support/wait.ts';
import { curl, startGateway, startTarget, type Gateway, type Target } from './harness.ts';

describe('SOCKS5 UDP ASSOCIATE', () => {
  let gw: Gateway;
  let target: Target;
  let echo: UdpSocket;
  let echoPort: number;
  const seen: RemoteInfo[] = [];

  before(async () => {
    gw = await startGateway({
      config: {
        users: [
          // Loopback only, whatever a datagram's header says (the fuzz below changes headers).
          { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', rules: { allowHosts: ['127.0.0.0/8'] } },
          { name: 'dora', password: 'dora-pass', mainAccount: 'shop1', limitBytes: 3000, rules: { allowHosts: ['127.0.0.0/8'] } },
        ],
      },
    });
    target = await startTarget();
    echo = createSocket('udp4');
    echo.on('message', (msg, rinfo) => {
      seen.push(rinfo);
      echo.send(msg, rinfo.port, rinfo.address);
    });
    await new Promise<void>((r) => echo.bind(0, '127.0.0.1', r));
    echoPort = echo.address().port;
  });
  after(async () => {
    echo?.close();
    await target?.close();
    await gw?.close();
  });

  const to = () => ({ host: '127.0.0.1', port: echoPort });

  test('datagrams to a loopback echo all come back, from the echo, and leave from an upstream exit', async () => {
    const { reply, a } = await associate(gw.ports.socks5, 'alice', 'alice-pass');
    assert.equal(reply, 0);
    try {
      seen.length = 0;
      for (let i = 0; i < 50; i++) a!.send(`ping-${i}`, to());
      await poll(() => a!.received.length >= 50, { timeoutMs: 15_000, what: 'all 50 echoes' });
      assert.deepEqual(new Set(a!.received.map((r) => r.payload)), new Set(Array.from({ length: 50 }, (_, i) => `ping-${i}`)));
      assert.ok(
        a!.received.every((r) => r.host === '127.0.0.1' && r.port === echoPort),
        'each answer names the echo as its source',
      );
      assert.ok(
        seen.every((r) => gw.exits.includes(r.address)),
        `the echo saw upstream exits: ${[...new Set(seen.map((r) => r.address))].join(',')}`,
      );
    } finally {
      a!.close();
    }
  });

  test("a sticky session's datagrams leave from the exit its TCP connections use", async () => {
    const user = 'alice-session-udp1';
    const tcp = await curl(['-x', `socks5h://${user}:alice-pass@127.0.0.1:${gw.ports.socks5}`, target.url('/ip')]);
    assert.equal(tcp.status, 200, tcp.stderr);
    const exit = tcp.body;
    assert.ok(gw.exits.includes(exit));
    for (let round = 0; round < 2; round++) {
      const { a } = await associate(gw.ports.socks5, user, 'alice-pass');
      try {
        seen.length = 0;
        a!.send(`sticky-${round}`, to());
        await poll(() => a!.received.length >= 1, { timeoutMs: 15_000, what: 'the echo' });
        assert.equal(seen[0]!.address, exit, `round ${round}: UDP left from the session's TCP exit`);
      } finally {
        a!.close();
      }
    }
  });

  test('payload bytes are metered both ways and recorded; the association ends with its control connection', async () => {
    const before = gw.daemon.accounting.usedOf('alice');
    const { a } = await associate(gw.ports.socks5, 'alice', 'alice-pass');
    const payload = Buffer.alloc(1000, 0x61);
    for (let i = 0; i < 10; i++) a!.send(payload, to());
    await poll(() => a!.received.length >= 10, { timeoutMs: 15_000, what: '10 echoes' });
    assert.equal(gw.daemon.accounting.usedOf('alice') - before, 20_000, '10 kB up and 10 kB down');
    // The control connection ends: Rotor's UDP port for it closes (a connected sender is told "refused").
    const probe = createSocket('udp4');
    await new Promise<void>((r) => probe.connect(a!.relay.port, a!.relay.host, r));
    const refused = new Promise<string>((resolve) => probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? '')));
    a!.control.destroy();
    const records = async () =>
      (await gw.admin<{ items: Array<Record<string, unknown>> }>('/v1/connections?user=alice&limit=100')).body.items;
    const record = await poll(async () => (await records()).find((r) => r.listener === 'socks5' && JSON.stringify(r).includes('10000')), {
      timeoutMs: 15_000,
      what: 'the association recorded',
    });
    assert.match(JSON.stringify(record), /10000.*10000/, `up and down bytes recorded: ${JSON.stringify(record)}`);
    const timer = setInterval(() => probe.send(Buffer.concat([udpHeader('127.0.0.1', echoPort)!, Buffer.from('late')])), 50);
    try {
      assert.equal(await refused, 'ECONNREFUSED');
    } finally {
      clearInterval(timer);
      probe.close();
      a!.udp.close();
    }
  });

  test('a quota cut stops the datagrams and ends the association', async () => {
    const { reply, a } = await associate(gw.ports.socks5, 'dora', 'dora-pass');
    assert.equal(reply, 0);
    const closed = new Promise<void>((r) => a!.control.once('close', () => r()));
    const timer = setInterval(() => a!.send(Buffer.alloc(400, 0x62), to()), 20);
    try {
      await closed;
    } finally {
      clearInterval(timer);
    }
    const echoed = a!.received.length;
    assert.ok(echoed < 10, `dora's 3000 bytes allow only a few round trips (${echoed})`);
    assert.ok(gw.daemon.accounting.usedOf('dora') >= 3000);
    a!.udp.close();
    // A new association is refused outright.
    assert.notEqual((await associate(gw.ports.socks5, 'dora', 'dora-pass')).reply, 0);
  });

  test('a user disabled through the admin API has its association ended at once, like its TCP tunnels', async () => {
    const made = await gw.admin('/v1/users', {
      body: { name: 'udpoff', password: 'udpoff-pass', mainAccount: 'shop1', rules: { allowHosts: ['127.0.0.0/8'] } },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const { reply, a } = await associate(gw.ports.socks5, 'udpoff', 'udpoff-pass');
    assert.equal(reply, 0);
    a!.send(Buffer.from('before'), to());
    await poll(() => a!.received.length >= 1, { timeoutMs: 15_000, what: 'an echo before the user is disabled' });
    const closed = new Promise<number>((r) => a!.control.once('close', () => r(Date.now())));
    const t0 = Date.now();
    const off = await gw.admin('/v1/users/udpoff', { method: 'PATCH', body: { enabled: false } });
    assert.equal(off.status, 200, JSON.stringify(off.body));
    // Bounded: the 5 s only turns an association that is never ended into a clear failure.
    const at = await Promise.race([closed, new Promise<number>((r) => setTimeout(() => r(-1), 5000))]);
    a!.udp.close();
    assert.ok(at > 0, 'the association was not ended');
    assert.ok(at - t0 < 1000, `ended after ${at - t0} ms`);
  });

  test('fuzzed UDP headers are dropped; the association and the daemon carry on', async () => {
    const { a } = await associate(gw.ports.socks5, 'alice', 'alice-pass');
    try {
      let seed = 7;
      const rand = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
      const droppedBefore = await gw.metric('rotor_udp_datagrams_dropped_total');
      const valid = Buffer.concat([udpHeader('127.0.0.1', echoPort)!, Buffer.from('x')]);
      for (let i = 0; i < 3000; i++) {
        let d: Buffer;
        if (i % 3 === 0) d = Buffer.from(Array.from({ length: Math.floor(rand() * 64) }, () => Math.floor(rand() * 256)));
        else {
          d = Buffer.from(valid);
          // RSV, FRAG, ATYP and the port: the address bytes stay loopback.
          for (let k = 0; k < 1 + Math.floor(rand() * 3); k++) d[[0, 1, 2, 3, 8, 9][Math.floor(rand() * 6)]!] = Math.floor(rand() * 256);
          if (i % 7 === 0) d[2] = 1 + Math.floor(rand() * 255); // a fragment: dropped
          if (i % 11 === 0) d = d.subarray(0, Math.floor(rand() * 10));
        }
        a!.udp.send(d, a!.relay.port, a!.relay.host);
      }
      // UDP may lose a datagram behind the burst in any of four socket buffers: asked again until answered.
      const again = setInterval(() => a!.send('still-alive', to()), 200);
      try {
        a!.send('still-alive', to());
        await poll(() => a!.received.some((r) => r.payload === 'still-alive'), { timeoutMs: 15_000, what: 'the association still relays' });
      } finally {
        clearInterval(again);
      }
      assert.equal(a!.control.destroyed, false);
      const fragments = await gw.metric('rotor_udp_datagrams_dropped_total', { reason: 'fragment' });
      // (The kernel may drop part of a burst this size before Rotor reads it: those are not Rotor's to count.)
      const counted = (await gw.metric('rotor_udp_datagrams_dropped_total')) - droppedBefore;
      assert.ok(fragments > 0 && counted > 100, `the dropped ones are counted (${counted}, fragments ${fragments})`);
      const r = await curl(['-x', `socks5h://alice:alice-pass@127.0.0.1:${gw.ports.socks5}`, target.url('/hello')]);
      assert.equal(r.body, 'hello from target');
    } finally {
      a!.close();
    }
  });

  test('an upstream without UDP: a clear 0x07 (command not supported), not a hang', async () => {
    gw.daemon.sim!.upstreams!.setUdp(false);
    try {
      const { reply } = await associate(gw.ports.socks5, 'alice', 'alice-pass');
      assert.equal(reply, 0x07);
    } finally {
      gw.daemon.sim!.upstreams!.setUdp(true);
    }
  });
});
