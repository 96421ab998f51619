// One metered, throttled stream for every relay (src/proxy/tunnel-stream.ts): the same user rate holds on a
// CONNECT tunnel, a SOCKS5 tunnel and a plain-HTTP forwarded download, and what Rotor reads from the upstream
// stays within 10 % of the rate even for a 10 KiB/s user — its upstream socket is read in pieces sized to the
// rate (src/proxy/paced-reads.ts), where node's own 64 KiB reads and the bucket's former 64 KiB burst let it
// take several seconds of its rate ahead. Real daemon in-process on the embedded sandbox (its upstreams are
// real proxies on loopback), a loopback target, raw clients over real sockets.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { SocksClient } from 'socks';
import { paceReads, readSizeFor } from '../../src/proxy/paced-reads.ts';
import { startGateway, type Gateway } from './harness.ts';
import { cleanup, startTarget, waitFor, type BytesTarget } from './limits-harness.ts';

const TOKEN = 'rate-shared-token-5d1f';
const KiB = 1024;
const MiB = 1024 * KiB;
const RATE = 10 * KiB;
/** How long each download is watched, from its first byte. */
const WINDOW_MS = 8000;

interface Live {
  user: string | null;
  bytesDown: number;
}

interface Download {
  way: string;
  user: string;
  socket: Socket;
  received: number;
  /** when the first byte arrived (ms) */
  firstAt: number;
}

const basic = (user: string): string => Buffer.from(`${user}:${user}-pass`).toString('base64');

/** Reads `socket` from now on, counting; resolves the download once its first byte has arrived. */
function counted(way: string, user: string, socket: Socket): Promise<Download> {
  return new Promise((resolve, reject) => {
    const d: Download = { way, user, socket, received: 0, firstAt: 0 };
    socket.on('data', (b: Buffer) => {
      d.received += b.length;
      if (d.firstAt === 0) {
        d.firstAt = performance.now();
        resolve(d);
      }
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error(`${way}: closed before the first byte`)));
  });
}

function opened(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port }, () => resolve(s));
    s.once('error', reject);
  });
}

describe('one rate for every relay', () => {
  let gw: Gateway;
  let bytes: BytesTarget;

  before(async () => {
    gw = await startGateway({ config: { admin: { token: TOKEN }, proxy: { connectTimeoutMs: 3000 } } });
    bytes = await startTarget();
  });

  after(async () => {
    await bytes.close();
    await gw.close();
    cleanup();
  });

  test('a paced socket reads in pieces of its rate and stops reading when paused', async () => {
    assert.equal(readSizeFor(10 * KiB), KiB);
    assert.equal(readSizeFor(256 * KiB), 16 * KiB);
    assert.equal(readSizeFor(100 * MiB), 64 * KiB);
    assert.equal(readSizeFor(0), 64 * KiB);
    const payload = Buffer.alloc(2 * MiB, 0x61);
    const server: Server = createServer((s) => {
      s.on('error', () => undefined);
      s.end(payload);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const client = await opened((server.address() as AddressInfo).port);
    try {
      assert.equal(paceReads(client, { rateBytesPerSec: 10 * KiB }), true);
      let delivered = 0;
      let largest = 0;
      let chunks = 0;
      const paused = new Promise<void>((resolve) => {
        client.on('data', (b: Buffer) => {
          delivered += b.length;
          largest = Math.max(largest, b.length);
          if (++chunks === 100) {
            client.pause();
            resolve();
          }
        });
      });
      await paused;
      const before = delivered;
      // Paused: nothing more than one piece is read ahead, however long it stays paused (node's own socket
      // reads on to its 16 KiB high-water mark, in 64 KiB reads). The server has megabytes waiting.
      const settled = await waitFor(
        'the paused socket to stop reading',
        (() => {
          let last = -1;
          let since = performance.now();
          return () => {
            const now = client.bytesRead;
            if (now !== last) {
              last = now;
              since = performance.now();
            }
            return performance.now() - since >= 300 ? now : undefined;
          };
        })(),
        10_000,
        20,
      );
      assert.ok(largest <= KiB, `the largest read was ${largest} B (paced at 1 KiB)`);
      assert.ok(settled - before <= 2 * KiB, `read ${settled - before} B ahead while paused`);
      // Resumed, it reads on to the end, every byte.
      const ended = new Promise<void>((r) => client.once('end', () => r()));
      client.resume();
      await ended;
      assert.equal(delivered, payload.length);
      assert.ok(largest <= KiB, `the largest read was ${largest} B (paced at 1 KiB)`);
    } finally {
      client.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  test(`10 KiB/s on CONNECT, SOCKS5 and plain HTTP: delivered and read from the upstream within 10 % of the rate over ${WINDOW_MS / 1000} s`, async () => {
    const ways = ['connect', 'socks5', 'http'] as const;
    for (const way of ways) {
      const created = await gw.admin('/v1/users', {
        body: { name: `rate_${way}`, password: `rate_${way}-pass`, mainAccount: 'shop1', rateBytesPerSec: RATE },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
    }
    const path = `/bytes/${64 * MiB}`;
    const authority = `127.0.0.1:${bytes.port}`;
    const start = async (way: (typeof ways)[number]): Promise<Download> => {
      const user = `rate_${way}`;
      if (way === 'socks5') {
        const { socket } = await SocksClient.createConnection({
          proxy: { host: '127.0.0.1', port: gw.ports.socks5, type: 5, userId: user, password: `${user}-pass` },
          command: 'connect',
          destination: { host: '127.0.0.1', port: bytes.port },
          timeout: 20_000,
        });
        const d = counted(way, user, socket);
        socket.write(`GET ${path} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
        return d;
      }
      const socket = await opened(gw.ports.http);
      if (way === 'http') {
        const d = counted(way, user, socket);
        socket.write(`GET http://${authority}${path} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: Basic ${basic(user)}\r\n\r\n`);
        return d;
      }
      // CONNECT: the tunnel's answer first, then the GET inside it; counted from the GET on.
      await new Promise<void>((resolve, reject) => {
        let head = '';
        const onData = (b: Buffer): void => {
          head += b.toString('latin1');
          if (!head.includes('\r\n\r\n')) return;
          socket.off('data', onData);
          if (head.startsWith('HTTP/1.1 200')) resolve();
          else reject(new Error(`CONNECT: ${head.slice(0, 100)}`));
        };
        socket.on('data', onData);
        socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: Basic ${basic(user)}\r\n\r\n`);
      });
      const d = counted(way, user, socket);
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
      return d;
    };
    const downloads = await Promise.all(ways.map(start));
    try {
      // Watched until the last one has run WINDOW_MS; each is judged at the same instant over its own time.
      const lastFirst = Math.max(...downloads.map((d) => d.firstAt));
      await waitFor('the window to pass', () => (performance.now() - lastFirst >= WINDOW_MS ? true : undefined), WINDOW_MS + 30_000, 50);
      const asked = performance.now();
      const received = downloads.map((d) => d.received);
      const live = (await gw.admin<Live[]>('/v1/connections/active')).body;
      // The record's bytes were read somewhere between the question and the answer: its midpoint, ± half.
      const at = (asked + performance.now()) / 2;
      const slack = (performance.now() - asked) / 2;
      const lines: string[] = [];
      const wrong: string[] = [];
      downloads.forEach((d, i) => {
        const seconds = (at - d.firstAt) / 1000;
        const allowed = RATE * seconds;
        const read = live.filter((r) => r.user === d.user).reduce((n, r) => n + r.bytesDown, 0);
        const got = received[i]!;
        lines.push(
          `${d.way}: in ${seconds.toFixed(2)} s the client got ${got} B (${((got / allowed) * 100).toFixed(1)} % of the rate), ` +
            `Rotor read ${read} B from the upstream (${((read / allowed) * 100).toFixed(1)} %)`,
        );
        const tolerance = 0.1 * allowed + (RATE * slack) / 1000;
        if (Math.abs(got - allowed) > tolerance) wrong.push(`${d.way}: delivered ${got} B, rate × time ${Math.round(allowed)} B`);
        if (Math.abs(read - allowed) > tolerance)
          wrong.push(`${d.way}: read ${read} B from the upstream, rate × time ${Math.round(allowed)} B`);
      });
      console.log(`# ${lines.join('\n# ')}`);
      assert.deepEqual(wrong, []);
    } finally {
      for (const d of downloads) d.socket.destroy();
    }
  });
});
