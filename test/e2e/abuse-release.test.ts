// Issue 23 item 6: a client that leaves releases its tunnel within a second, paused by the rate limiter or
// not. A rate-limited user (16 KiB/s, so its bucket is deep in debt with several downloads) and an unlimited
// one, made with POST /v1/users on the in-process daemon, download an endless body through CONNECT, SOCKS5,
// plain HTTP and the user's own port; the clients read what arrives, then leave (a FIN, nothing unread);
// the user's active connections (GET /v1/users/:name) must be back to 0 within a second.
import assert from 'node:assert/strict';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { socks5Connect } from '../support/socks5-connect.ts';
import { freePort } from '../support/ports.ts';
import { poll } from '../support/wait.ts';
import { startGateway, startTarget, type Gateway, type Target } from './harness.ts';

const TOKEN = 'abuse-release-token-51c2';
const CLIENTS = 4;
const ENDLESS = 1024 * 1024 * 1024;

type Way = 'connect' | 'socks5' | 'http' | 'user-port';

interface Download {
  socket: Socket;
  received: number;
}

function basic(user: string): string {
  return Buffer.from(`${user}:${user}-pass`).toString('base64');
}

/** Opens one download of an endless body through `way`; resolves once its first body bytes arrived. */
function download(way: Way, gw: Gateway, user: string, userPort: number, targetPort: number): Promise<Download> {
  const path = `/bytes/${ENDLESS}`;
  const get = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\n\r\n`;
  return new Promise((resolve, reject) => {
    const port = way === 'socks5' ? gw.ports.socks5 : way === 'user-port' ? userPort : gw.ports.http;
    const socket = connect({ host: '127.0.0.1', port });
    const d: Download = { socket, received: 0 };
    const timer = setTimeout(() => reject(new Error(`${way}: no body within 10 s`)), 10_000);
    socket.once('error', reject);
    const flowing = (): void => {
      socket.on('data', (c: Buffer) => {
        d.received += c.length;
        if (d.received > 1000) {
          clearTimeout(timer);
          resolve(d);
        }
      });
    };
    const afterTunnel = (): void => {
      flowing();
      socket.resume();
      socket.write(get);
    };
    socket.once('connect', () => {
      if (way === 'socks5') {
        socks5Connect(socket, { host: '127.0.0.1', port: targetPort }, { username: user, password: `${user}-pass` }, (err, head) => {
          if (err) return reject(err);
          d.received += head?.length ?? 0;
          afterTunnel();
        });
      } else if (way === 'http') {
        flowing();
        socket.write(
          `GET http://127.0.0.1:${targetPort}${path} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nProxy-Authorization: Basic ${basic(user)}\r\n\r\n`,
        );
      } else {
        // CONNECT on the shared listener (with credentials) or on the user's own port (allowed address).
        const auth = way === 'connect' ? `Proxy-Authorization: Basic ${basic(user)}\r\n` : '';
        let head = '';
        const onHead = (c: Buffer): void => {
          head += c.toString('latin1');
          const end = head.indexOf('\r\n\r\n');
          if (end < 0) return;
          socket.off('data', onHead);
          if (!head.startsWith('HTTP/1.1 200')) {
            reject(new Error(`${way}: ${head.slice(0, 40)}`));
            return;
          }
          d.received += head.length - end - 4;
          afterTunnel();
        };
        socket.on('data', onHead);
        socket.write(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\n${auth}\r\n`);
      }
    });
  });
}

describe('a client that leaves releases its tunnel within a second (issue 23 item 6)', () => {
  let gw: Gateway;
  let target: Target;

  before(async () => {
    gw = await startGateway({ config: { admin: { token: TOKEN }, proxy: { connectTimeoutMs: 3000 } } });
    target = await startTarget();
  });

  /** A user of its own per case (a case that fails must not leave connections counted for the next). */
  async function user(name: string, limited: boolean): Promise<number> {
    const port = await freePort();
    const extra = limited ? { rateBytesPerSec: 16 * 1024 } : {};
    const r = await gw.admin('/v1/users', {
      body: { name, password: `${name}-pass`, mainAccount: 'shop1', listen: { port, allowIps: ['127.0.0.1/32'] }, ...extra },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return poll(() => gw.daemon.userPorts.portOf(name), { timeoutMs: 5000 });
  }
  after(async () => {
    await target.close();
    await gw.close();
  });

  const active = async (user: string): Promise<number> =>
    (await gw.admin<{ activeConnections: number }>(`/v1/users/${user}`)).body.activeConnections;

  test('rate-limited (16 KiB/s) user, CONNECT: a client that only half-closes (FIN after its request) still gets its whole download', async () => {
    await user('slow_halfclose', true);
    // Four seconds of the rate (the burst is 4 KiB): the download is paced long after the client's FIN.
    const size = 64 * 1024;
    // A target that answers after the request head and ignores the client's FIN (allowHalfOpen).
    const raw = createNetServer({ allowHalfOpen: true }, (s) => {
      let head = '';
      s.on('data', (c: Buffer) => {
        head += c.toString('latin1');
        if (!head.includes('\r\n\r\n')) return;
        head = '';
        s.end(Buffer.alloc(size, 0x62));
      });
      s.on('error', () => undefined);
    });
    await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
    const rawPort = (raw.address() as AddressInfo).port;
    try {
      const socket = connect({ host: '127.0.0.1', port: gw.ports.http, allowHalfOpen: true });
      let got = 0;
      let head = '';
      let tunnel = false;
      const ended = new Promise<void>((r) => socket.once('end', () => r()));
      socket.on('data', (c: Buffer) => {
        if (tunnel) {
          got += c.length;
          return;
        }
        head += c.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        tunnel = true;
        got += head.length - end - 4;
        socket.end('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      });
      socket.write(
        `CONNECT 127.0.0.1:${rawPort} HTTP/1.1\r\nHost: 127.0.0.1:${rawPort}\r\nProxy-Authorization: Basic ${basic('slow_halfclose')}\r\n\r\n`,
      );
      await ended;
      socket.destroy();
      assert.equal(got, size, 'every byte arrived after the half-close');
    } finally {
      raw.close();
    }
  });

  for (const limited of [true, false]) {
    for (const way of ['connect', 'socks5', 'http', 'user-port'] as const) {
      test(`${limited ? 'rate-limited (16 KiB/s)' : 'unlimited'} user, ${way}: ${CLIENTS} clients leave mid-download → 0 active within 1 s`, async () => {
        const name = `${limited ? 'slow' : 'fast'}_${way.replace('-', '_')}`;
        const port = await user(name, limited);
        const downloads = await Promise.all(Array.from({ length: CLIENTS }, () => download(way, gw, name, port, target.port)));
        assert.equal(await active(name), CLIENTS);
        // Let the bucket go into debt and the relays be held (a rate-limited user), then leave: every byte that
        // arrived has been read, so each client's close is a FIN. Each download past a burst's worth (4 KiB at
        // 16 KiB/s) means every relay has been paced, and the four together are a second of the rate past it.
        if (limited) await poll(() => downloads.every((d) => d.received > 4 * 1024), { timeoutMs: 15_000 });
        const t0 = Date.now();
        for (const d of downloads) d.socket.destroy();
        const left = await poll(async () => ((await active(name)) === 0 ? Date.now() - t0 : undefined), {
          timeoutMs: 5000,
          everyMs: 20,
        }).catch(() => -1);
        console.log(`# ${name}: released after ${left} ms`);
        assert.ok(left >= 0 && left <= 1000, left < 0 ? 'still active after 5 s' : `released after ${left} ms`);
      });
    }
  }
});
