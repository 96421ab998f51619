// The per-user bounds of SOCKS5 UDP ASSOCIATE, with real sockets and a SOCKS5 UDP client: the association
// past proxy.udp.maxAssociationsPerUser is refused clearly while the others carry on; datagrams over the
// user's rate wait in a queue of at most proxy.udp.maxPendingDatagrams (and one second of the rate), and the
// ones beyond it are dropped and counted (rotor_udp_datagrams_dropped_total), never held; the bytes relayed
// follow the rate; UDP payload bytes show in rotor_proxy_bytes_total and rotor_user_used_bytes like TCP's.
import assert from 'node:assert/strict';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { after, before, describe, test } from 'node:test';
import { associate, type Association } from '../support/socks5-udp.ts';
import { poll } from '../support/wait.ts';
import { startGateway, type Gateway } from './harness.ts';
import { burstFor } from '../../src/admission/limiter.ts';

const LOOPBACK = { allowHosts: ['127.0.0.0/8'] };
const user = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  password: `${name}-pass`,
  mainAccount: 'shop1',
  rules: LOOPBACK,
  ...extra,
});
const RITA_RATE = 100_000;
const ROSE_RATE = 20_000;
/** What each user's bucket holds at most (src/admission/limiter.ts burstFor). */
const RITA_BURST = burstFor(RITA_RATE);
const ROSE_BURST = burstFor(ROSE_RATE);

/** A datagram's payload: its index, padded to `size` bytes. */
const payload = (i: number, size = 1000): Buffer => {
  const b = Buffer.alloc(size, 0x2e);
  b.write(`${i}:`);
  return b;
};
const indexOf = (p: string): number => Number(p.slice(0, p.indexOf(':')));

describe('UDP ASSOCIATE bounds per user, rate and byte counts', () => {
  let gw: Gateway;
  let echo: UdpSocket;
  const to = () => ({ host: '127.0.0.1', port: echo.address().port });
  const dropped = (reason: string) => gw.metric('rotor_udp_datagrams_dropped_total', { reason });
  const open: Association[] = [];
  const assoc = async (name: string): Promise<{ reply: number; a?: Association }> => {
    const r = await associate(gw.ports.socks5, name, `${name}-pass`);
    if (r.a) open.push(r.a);
    return r;
  };
  /** Sends one datagram until its echo is back (UDP may lose one on a loaded machine). */
  const roundTrip = async (a: Association, text: string): Promise<void> => {
    const again = setInterval(() => a.send(text, to()), 300);
    try {
      a.send(text, to());
      await poll(() => a.received.some((r) => r.payload === text), { timeoutMs: 15_000, what: `the echo of ${text}` });
    } finally {
      clearInterval(again);
    }
  };

  before(async () => {
    gw = await startGateway({
      config: {
        proxy: { udp: { maxAssociationsPerUser: 2, maxPendingDatagrams: 3 } },
        users: [
          user('alice'),
          user('bob'),
          user('rita', { rateBytesPerSec: RITA_RATE }),
          user('rose', { rateBytesPerSec: ROSE_RATE }),
          user('uma'),
        ],
      },
    });
    echo = createSocket('udp4');
    echo.on('message', (msg, rinfo) => echo.send(msg, rinfo.port, rinfo.address));
    await new Promise<void>((r) => echo.bind(0, '127.0.0.1', r));
  });
  after(async () => {
    for (const a of open) a.close();
    echo?.close();
    await gw?.close();
  });

  test('maxAssociationsPerUser: the next association is refused 0x02 and recorded; the others and other users carry on', async () => {
    const first = await assoc('alice');
    const second = await assoc('alice');
    assert.equal(first.reply, 0);
    assert.equal(second.reply, 0);
    assert.equal((await assoc('alice')).reply, 0x02, 'the third is refused: connection not allowed by the rule set');
    const record = await poll(
      async () =>
        (
          await gw.admin<{ items: Array<{ result: string; reason: string | null }> }>('/v1/connections?user=alice&limit=20')
        ).body.items.find((r) => /UDP associations/.test(r.reason ?? '')),
      { timeoutMs: 10_000, what: 'the refusal recorded' },
    );
    assert.equal(record.result, 'limited');
    assert.match(record.reason ?? '', /too many UDP associations \(at most 2\)/);
    await roundTrip(first.a!, 'first-still-works');
    await roundTrip(second.a!, 'second-still-works');
    const bob = await assoc('bob');
    assert.equal(bob.reply, 0, "another user's association is not affected");
    await roundTrip(bob.a!, 'bob-works');
    // One ends: its slot is free again once Rotor has seen its control connection close.
    first.a!.close();
    const again = await poll(
      async () => {
        const r = await assoc('alice');
        return r.reply === 0 ? r : undefined;
      },
      { timeoutMs: 10_000, what: 'a new association once one ended' },
    );
    await roundTrip(again.a!, 'third-works');
    for (const r of [second, bob, again]) r.a!.close();
  });

  test('maxPendingDatagrams: datagrams over the rate beyond the queue are dropped and counted, none held; others unaffected', async () => {
    const { a } = await assoc('rita');
    const { a: bob } = await assoc('bob');
    const before = await dropped('queue_full');
    const used0 = gw.daemon.accounting.usedOf('rita');
    const sent = 200;
    // Paced in batches, so the kernel's socket buffers never overflow (their losses would not be Rotor's).
    for (let i = 0; i < sent; i += 10) {
      for (let k = i; k < i + 10; k++) a!.send(payload(k), to());
      bob!.send(`bob-${i}`, to());
      await new Promise((r) => setImmediate(r));
    }
    // Every datagram either came back or was dropped and counted (both ways); nothing waits for ever.
    await poll(async () => a!.received.length + ((await dropped('queue_full')) - before) >= sent - 5, {
      timeoutMs: 20_000,
      what: 'every datagram delivered or counted',
    });
    const d = (await dropped('queue_full')) - before;
    assert.ok(d > 50, `most of a burst far over the queue is dropped (${d})`);
    assert.ok(a!.received.length + d <= sent, `delivered ${a!.received.length} + dropped ${d} ≤ sent ${sent}`);
    const used = gw.daemon.accounting.usedOf('rita') - used0;
    assert.ok(used >= RITA_BURST - 1000, `the bucket's burst went through (${used} bytes)`);
    // The queued ones go out as the bucket refills, and their echoes come back after the burst's.
    await poll(() => a!.received.length >= 3, { timeoutMs: 10_000, what: 'the queued ones to go out when the bucket refilled' });
    // bob has no rate: all of his came back (asked again for any lost on the way).
    await poll(() => bob!.received.length >= 18, { timeoutMs: 15_000, what: "bob's echoes during rita's burst" });
    // The queue emptied: rita's association still relays.
    await roundTrip(a!, 'rita-after');
    a!.close();
    bob!.close();
    // The association's record says how many of its datagrams were dropped: all of them, counted when it ended
    // (up to 5 of the burst could still be on their way, and dropped, when `d` was read above).
    const record = await poll(
      async () =>
        (await gw.admin<{ items: Array<{ reason: string | null }> }>('/v1/connections?user=rita&limit=5')).body.items.find((r) =>
          /datagrams dropped/.test(r.reason ?? ''),
        ),
      { timeoutMs: 10_000, what: "rita's association recorded" },
    );
    const droppedInAll = (await dropped('queue_full')) - before;
    assert.ok(droppedInAll >= d && droppedInAll <= d + 5, `dropped ${d}, then ${droppedInAll} in all`);
    assert.equal(Number(/(\d+) datagrams dropped/.exec(record.reason!)![1]), droppedInAll);
  });

  test('UDP under the per-second rate: bytes relayed follow the rate, queued datagrams are late by a bounded time', async () => {
    const { a } = await assoc('rose');
    const before = await dropped('queue_full');
    const used0 = gw.daemon.accounting.usedOf('rose');
    const sentAt = new Map<number, number>();
    const sent = 150;
    const start = Date.now();
    // 50 datagrams of 1000 bytes a second for 3 s: 100 kB/s both ways against 20 kB/s.
    for (let i = 0; i < sent; i++) {
      sentAt.set(i, Date.now());
      a!.send(payload(i), to());
      await new Promise((r) => setTimeout(r, 20));
    }
    await poll(async () => a!.received.length + ((await dropped('queue_full')) - before) >= sent - 5, {
      timeoutMs: 20_000,
      what: 'every datagram delivered or counted',
    });
    const elapsed = (Date.now() - start) / 1000;
    const used = gw.daemon.accounting.usedOf('rose') - used0;
    assert.ok(
      used <= ROSE_BURST + ROSE_RATE * elapsed + 4000,
      `${used} bytes in ${elapsed.toFixed(2)} s at ${ROSE_RATE} B/s (burst ${ROSE_BURST})`,
    );
    assert.ok(used > ROSE_BURST, `the rate let the burst and more through (${used})`);
    assert.ok((await dropped('queue_full')) - before > 0, 'over the rate beyond the queue: dropped and counted');
    const late = a!.received.map((r) => r.at - sentAt.get(indexOf(r.payload))!);
    assert.ok(Math.max(...late) < 5000, `the latest echo came ${Math.max(...late)} ms after it was sent`);
    a!.close();
  });

  test('UDP payload bytes are counted in rotor_proxy_bytes_total and rotor_user_used_bytes like TCP bytes', async () => {
    const { a } = await assoc('uma');
    for (let i = 0; i < 10; i++) a!.send(payload(i), to());
    await poll(() => a!.received.length >= 10, { timeoutMs: 15_000, what: '10 echoes' });
    await poll(async () => (await gw.metric('rotor_proxy_bytes_total', { user: 'uma', direction: 'down' })) === 10_000, {
      timeoutMs: 15_000,
      what: 'the bytes in /metrics',
    });
    assert.equal(await gw.metric('rotor_proxy_bytes_total', { user: 'uma', direction: 'up' }), 10_000);
    assert.equal(await gw.metric('rotor_user_used_bytes', { user: 'uma' }), 20_000);
    a!.close();
  });
});
