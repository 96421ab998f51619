// A client that stops reading must stop Rotor reading the upstream (issue 23 item 1, and its bytes are charged
// by the platform): Rotor's own queue is bounded, and proxy.clientUnsentBytes bounds what the kernel takes into
// the client socket's send buffer (TCP_NOTSENT_LOWAT), which otherwise autotunes to tcp_wmem's maximum (4 MiB).
// Measured on the real daemon: the live connection's bytesDown (what Rotor read from the upstream) once it
// stops growing, for a plain-HTTP download and a CONNECT tunnel whose clients never read. Red before the
// listeners applied the bound (about 4.3 MiB read for each).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startGateway, type Gateway } from './harness.ts';
import { poll } from '../support/wait.ts';

const TOKEN = 'unsent-limit-token-3c9a';
const KiB = 1024;
const UNSENT = 128 * KiB;
const CHUNK = Buffer.alloc(64 * KiB, 0x62);
/** The client's receive buffer as it starts (it does not grow for a client that never reads). */
const RMEM = (() => {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/tcp_rmem', 'utf8').trim().split(/\s+/)[1]);
  } catch {
    return 128 * KiB;
  }
})();
/** Rotor's own bounded slack (its write queue and one read) plus the unsent bound and the client's buffer. */
const BOUND = RMEM + UNSENT + 512 * KiB;

interface Live {
  id: string;
  user?: string;
  bytesDown: number;
}

describe('a client that never reads: what Rotor reads from the upstream is bounded (proxy.clientUnsentBytes)', () => {
  let gw: Gateway;
  let target: Server;
  let port = 0;
  const sockets = new Set<Socket>();

  before(async () => {
    gw = await startGateway({ config: { admin: { token: TOKEN }, proxy: { clientUnsentBytes: UNSENT } } });
    // Endless bytes, as fast as the reader takes them.
    target = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const pump = (): void => {
        while (res.write(CHUNK));
        res.once('drain', pump);
      };
      pump();
    });
    target.on('connection', (s) => {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    port = (target.address() as AddressInfo).port;
    const r = await gw.admin('/v1/users', { body: { name: 'sleepy', password: 'sleepy-pass', mainAccount: 'shop1' } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => target.close(() => resolve()));
    await gw.close();
  });

  /** Opens a client that sends `head` and never reads; resolves with Rotor's settled bytesDown for it. */
  async function neverReading(head: string): Promise<number> {
    const before = new Set((await gw.admin<Live[]>('/v1/connections/active')).body.map((c) => c.id));
    const socket = connect({ host: '127.0.0.1', port: gw.ports.http });
    socket.pause();
    socket.on('error', () => undefined);
    try {
      socket.write(head);
      let id = '';
      let last = -1;
      let still = 0;
      // Settled: the same figure on five reads 100 ms apart after it passed 64 KiB.
      await poll(
        async () => {
          const live = (await gw.admin<Live[]>('/v1/connections/active')).body.find((c) => !before.has(c.id) && (!id || c.id === id));
          if (!live) return false;
          id = live.id;
          still = live.bytesDown === last && live.bytesDown > 64 * KiB ? still + 1 : 0;
          last = live.bytesDown;
          return still >= 5;
        },
        { timeoutMs: 30_000, everyMs: 100 },
      );
      return last;
    } finally {
      socket.destroy();
    }
  }

  const auth = `Proxy-Authorization: Basic ${Buffer.from('sleepy:sleepy-pass').toString('base64')}\r\n`;

  test('plain HTTP: a download the client never reads', async () => {
    const read = await neverReading(`GET http://127.0.0.1:${port}/big HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${auth}\r\n`);
    console.log(`# plain HTTP: Rotor read ${read} B for a client that never reads (bound ${BOUND})`);
    assert.ok(read <= BOUND, `Rotor read ${read} B (at most ${BOUND})`);
  });

  test('CONNECT: a tunnel whose client never reads', async () => {
    const read = await neverReading(
      `CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${auth}\r\n` +
        `GET /big HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`,
    );
    console.log(`# CONNECT: Rotor read ${read} B for a client that never reads (bound ${BOUND})`);
    assert.ok(read <= BOUND, `Rotor read ${read} B (at most ${BOUND})`);
  });
});
