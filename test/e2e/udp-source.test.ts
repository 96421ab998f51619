// Whose datagrams a SOCKS5 UDP association takes (RFC 1928 §7): the request's DST.ADDR/DST.PORT where not
// zero, else the control connection's address and the first datagram's port. A neighbour behind the client's
// NAT (the same address, another port) racing to send first must not take the association over: its datagrams
// are dropped unread and counted (rotor_udp_datagrams_dropped_total{reason="foreign"}), reach no target, and it
// never gets a reply. Before, a request naming only its port (or only its address) was served like an all-zero
// one: the first datagram from the control connection's address took the association, the neighbour's included.
// Real daemon on the embedded sandbox, real UDP sockets on loopback.
import assert from 'node:assert/strict';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { parseUdpHeader, udpHeader } from '../../src/wire/socks5-udp.ts';
import { poll } from '../support/wait.ts';
import { startGateway, type Gateway } from './harness.ts';

/** A UDP socket of the test's, bound on `address`, with the payloads it was sent back. */
interface Peer {
  udp: UdpSocket;
  port: number;
  received: string[];
}

async function peer(address: string): Promise<Peer> {
  const udp = createSocket(address.includes(':') ? 'udp6' : 'udp4');
  const received: string[] = [];
  udp.on('message', (msg) => {
    const h = parseUdpHeader(msg);
    if (!('error' in h)) received.push(msg.subarray(h.length).toString());
  });
  await new Promise<void>((r) => udp.bind(0, address, r));
  return { udp, port: udp.address().port, received };
}

/** Reads from `s` until `n` bytes came (the bytes read so far are kept on the socket between calls). */
function reader(s: Socket): (n: number) => Promise<Buffer> {
  let buf = Buffer.alloc(0);
  let want: { n: number; resolve: (b: Buffer) => void } | undefined;
  const check = (): void => {
    if (want && buf.length >= want.n) {
      const { n, resolve } = want;
      want = undefined;
      const out = buf.subarray(0, n);
      buf = buf.subarray(n);
      resolve(out);
    }
  };
  s.on('data', (c: Buffer) => {
    buf = Buffer.concat([buf, c]);
    check();
  });
  return (n) =>
    new Promise<Buffer>((resolve, reject) => {
      want = { n, resolve };
      s.once('close', () => reject(new Error(`closed before ${n} bytes`)));
      check();
    });
}

/**
 * UDP ASSOCIATE from a control connection bound on `from`, its DST.ADDR/DST.PORT given as the request's address
 * bytes (ATYP first): the reply code and, when 0, the relay's port.
 */
async function associate(
  port: number,
  from: string,
  dst: Buffer,
  host = '127.0.0.1',
): Promise<{ reply: number; relay: number; control: Socket }> {
  const control = connect({ host, port, localAddress: from });
  control.on('error', () => undefined);
  await new Promise<void>((r, j) => control.once('connect', r).once('error', j));
  const read = reader(control);
  control.write(Buffer.from([5, 1, 2]));
  assert.deepEqual([...(await read(2))], [5, 2]);
  const u = Buffer.from('alice');
  const p = Buffer.from('alice-pass');
  control.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
  assert.deepEqual([...(await read(2))], [1, 0]);
  control.write(Buffer.concat([Buffer.from([5, 3, 0]), dst]));
  const head = await read(4);
  if (head[1] !== 0) return { reply: head[1]!, relay: 0, control };
  assert.ok(head[3] === 1 || head[3] === 4, `BND.ADDR type ${head[3]}`);
  const rest = await read(head[3] === 1 ? 6 : 18);
  return { reply: 0, relay: rest.readUInt16BE(rest.length - 2), control };
}

/** DST as ATYP 1: an IPv4 address and a port. */
function ipv4(address: string, port: number): Buffer {
  const b = Buffer.alloc(7);
  b[0] = 1;
  address.split('.').forEach((x, i) => (b[1 + i] = Number(x)));
  b.writeUInt16BE(port, 5);
  return b;
}

describe('SOCKS5 UDP ASSOCIATE: the source a datagram must come from', () => {
  let gw: Gateway;
  let echo: UdpSocket;
  let echoPort: number;
  /** Payloads the echo saw (what reached a target). */
  const seen: string[] = [];
  const opened: Array<{ close(): void }> = [];

  before(async () => {
    gw = await startGateway({
      config: { users: [{ name: 'alice', password: 'alice-pass', mainAccount: 'shop1', rules: { allowHosts: ['127.0.0.0/8'] } }] },
    });
    echo = createSocket('udp4');
    echo.on('message', (msg, rinfo) => {
      seen.push(msg.toString());
      echo.send(msg, rinfo.port, rinfo.address);
    });
    await new Promise<void>((r) => echo.bind(0, '127.0.0.1', r));
    echoPort = echo.address().port;
  });
  after(async () => {
    for (const o of opened) o.close();
    echo?.close();
    await gw?.close();
  });

  const send = (p: Peer, relay: number, payload: string): void => {
    p.udp.send(Buffer.concat([udpHeader('127.0.0.1', echoPort)!, Buffer.from(payload)]), relay, '127.0.0.1');
  };
  const foreign = (): Promise<number> => gw.metric('rotor_udp_datagrams_dropped_total', { reason: 'foreign' });

  /**
   * The neighbour sends `n` datagrams first: all must be dropped as foreign (counted), none reach the echo; then
   * the client's own go through and come back, the neighbour still answered nothing.
   */
  async function neighbourFirst(relay: number, client: Peer, neighbour: Peer, tag: string): Promise<void> {
    const before = await foreign();
    for (let i = 0; i < 5; i++) send(neighbour, relay, `${tag}-neighbour-${i}`);
    await poll(async () => (await foreign()) - before >= 5, {
      what: `the neighbour's 5 datagrams dropped as foreign (${tag})`,
      timeoutMs: 10_000,
      everyMs: 50,
    });
    // UDP may lose one on a loaded machine: sent again until answered.
    const again = setInterval(() => send(client, relay, `${tag}-client`), 300);
    try {
      send(client, relay, `${tag}-client`);
      await poll(() => client.received.includes(`${tag}-client`), { what: `the client's echo (${tag})`, timeoutMs: 15_000 });
    } finally {
      clearInterval(again);
    }
    // After the client is served the neighbour tries again: still dropped, still no reply.
    const mid = await foreign();
    send(neighbour, relay, `${tag}-neighbour-late`);
    await poll(async () => (await foreign()) > mid, {
      what: `the neighbour's late datagram dropped (${tag})`,
      timeoutMs: 10_000,
      everyMs: 50,
    });
    assert.deepEqual(neighbour.received, [], `the neighbour got replies (${tag})`);
    assert.ok(!seen.some((s) => s.startsWith(`${tag}-neighbour`)), `a neighbour's datagram reached the target (${tag}): ${seen.join(',')}`);
  }

  test('DST.PORT named, address zero: a neighbour on the same address racing first is dropped, the named port is served', async () => {
    const client = await peer('127.0.0.1');
    const neighbour = await peer('127.0.0.1');
    opened.push({ close: () => client.udp.close() }, { close: () => neighbour.udp.close() });
    const { reply, relay, control } = await associate(gw.ports.socks5, '127.0.0.1', ipv4('0.0.0.0', client.port));
    opened.push({ close: () => control.destroy() });
    assert.equal(reply, 0);
    await neighbourFirst(relay, client, neighbour, 'port');
  });

  test('DST.ADDR named, port zero: only that address is taken, not the control connection’s', async () => {
    // The client sends from 127.0.0.30 (a second interface of its host) and says so; the control connection
    // comes from 127.0.0.1, where a neighbour races first.
    const client = await peer('127.0.0.30');
    const neighbour = await peer('127.0.0.1');
    opened.push({ close: () => client.udp.close() }, { close: () => neighbour.udp.close() });
    const { reply, relay, control } = await associate(gw.ports.socks5, '127.0.0.1', ipv4('127.0.0.30', 0));
    opened.push({ close: () => control.destroy() });
    assert.equal(reply, 0);
    await neighbourFirst(relay, client, neighbour, 'addr');
  });

  test('DST.ADDR and DST.PORT named: only that address and port', async () => {
    const client = await peer('127.0.0.1');
    const neighbour = await peer('127.0.0.1');
    opened.push({ close: () => client.udp.close() }, { close: () => neighbour.udp.close() });
    const { reply, relay, control } = await associate(gw.ports.socks5, '127.0.0.1', ipv4('127.0.0.1', client.port));
    opened.push({ close: () => control.destroy() });
    assert.equal(reply, 0);
    await neighbourFirst(relay, client, neighbour, 'both');
  });

  test('all zero: the first datagram from the control connection’s address fixes the port; a second port is dropped and never answered', async () => {
    const client = await peer('127.0.0.1');
    const second = await peer('127.0.0.1');
    opened.push({ close: () => client.udp.close() }, { close: () => second.udp.close() });
    const { reply, relay, control } = await associate(gw.ports.socks5, '127.0.0.1', ipv4('0.0.0.0', 0));
    opened.push({ close: () => control.destroy() });
    assert.equal(reply, 0);
    const again = setInterval(() => send(client, relay, 'zero-first'), 300);
    try {
      send(client, relay, 'zero-first');
      await poll(() => client.received.includes('zero-first'), { what: 'the first source served', timeoutMs: 15_000 });
    } finally {
      clearInterval(again);
    }
    const before = await foreign();
    for (let i = 0; i < 5; i++) send(second, relay, `zero-second-${i}`);
    await poll(async () => (await foreign()) - before >= 5, {
      what: "the second port's 5 datagrams dropped as foreign",
      timeoutMs: 10_000,
      everyMs: 50,
    });
    // The first source still served, and its replies go to it alone.
    client.received.length = 0;
    const again2 = setInterval(() => send(client, relay, 'zero-again'), 300);
    try {
      send(client, relay, 'zero-again');
      await poll(() => client.received.includes('zero-again'), { what: 'the first source still served', timeoutMs: 15_000 });
    } finally {
      clearInterval(again2);
    }
    assert.deepEqual(second.received, []);
    assert.ok(!seen.some((s) => s.startsWith('zero-second')), seen.join(','));
  });

  test('a domain name as DST.ADDR: refused 0x08, no association', async () => {
    const name = Buffer.from('localhost');
    const dst = Buffer.concat([Buffer.from([3, name.length]), name, Buffer.from([0, 0])]);
    const { reply, control } = await associate(gw.ports.socks5, '127.0.0.1', dst);
    opened.push({ close: () => control.destroy() });
    assert.equal(reply, 0x08);
  });
});

describe("SOCKS5 UDP ASSOCIATE over IPv6: a named DST.ADDR is matched in the kernel's form", () => {
  let gw: Gateway;
  let echo: UdpSocket;
  let echoPort: number;
  const opened: Array<{ close(): void }> = [];

  before(async () => {
    gw = await startGateway({
      config: {
        proxy: { socks5: { host: '::1', port: 0 } },
        users: [{ name: 'alice', password: 'alice-pass', mainAccount: 'shop1', rules: { allowHosts: ['127.0.0.0/8'] } }],
      },
    });
    echo = createSocket('udp4');
    echo.on('message', (msg, rinfo) => echo.send(msg, rinfo.port, rinfo.address));
    await new Promise<void>((r) => echo.bind(0, '127.0.0.1', r));
    echoPort = echo.address().port;
  });
  after(async () => {
    for (const o of opened) o.close();
    echo?.close();
    await gw?.close();
  });

  test('DST ::1 and the client port (sent as 0:0:0:0:0:0:0:1 on the wire): the client is served, a neighbour on ::1 is not', async () => {
    const client = await peer('::1');
    const neighbour = await peer('::1');
    opened.push({ close: () => client.udp.close() }, { close: () => neighbour.udp.close() });
    const dst = Buffer.alloc(19);
    dst[0] = 4;
    dst[16] = 1; // ::1
    dst.writeUInt16BE(client.port, 17);
    const { reply, relay, control } = await associate(gw.ports.socks5, '::1', dst, '::1');
    opened.push({ close: () => control.destroy() });
    assert.equal(reply, 0);
    const send = (p: Peer, payload: string): void => {
      p.udp.send(Buffer.concat([udpHeader('127.0.0.1', echoPort)!, Buffer.from(payload)]), relay, '::1');
    };
    const foreign = (): Promise<number> => gw.metric('rotor_udp_datagrams_dropped_total', { reason: 'foreign' });
    const before = await foreign();
    send(neighbour, 'v6-neighbour');
    await poll(async () => (await foreign()) > before, {
      what: "the neighbour's datagram dropped as foreign",
      timeoutMs: 10_000,
      everyMs: 50,
    });
    const again = setInterval(() => send(client, 'v6-client'), 300);
    try {
      send(client, 'v6-client');
      await poll(() => client.received.includes('v6-client'), { what: "the named IPv6 client's echo", timeoutMs: 15_000 });
    } finally {
      clearInterval(again);
    }
    assert.deepEqual(neighbour.received, []);
  });
});
