// Issue 23 item 1: pipelined plain-HTTP requests (absolute URI) through Rotor's HTTP listener, against the
// in-process daemon on the embedded sandbox, users made with POST /v1/users, raw client sockets and a loopback
// target that counts its requests in flight and the body bytes it has handed to its sockets:
//   - a client connection has one request in flight through Rotor (the next starts once the previous
//     response is written), so a maxConnections: 2 user never has more than 2 at the target;
//   - a client that never reads stops the upstream (the target is held back to what the kernel's socket
//     buffers take) and keeps its answers: once it reads, every response arrives whole and in order;
//   - past proxy.pipelineDepth queued requests the connection is answered 503 and closed;
//   - a rate-limited user's pipelined downloads go one at a time through its bucket (the target is never
//     far ahead of what the client received).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startGateway, type Gateway } from './harness.ts';
import { poll } from '../support/wait.ts';

const TOKEN = 'abuse-pipelining-token-7f1d';
const KB200 = 200 * 1024;
const MiB = 1024 * 1024;
const DEPTH = 8;
const PIECE = Buffer.alloc(16 * 1024, 0x61);
/** Loopback socket buffers one never-reading connection can fill: the sender's largest send buffer plus the receiver's default. */
const KERNEL_BUFFERS = (() => {
  try {
    const wmem = Number(readFileSync('/proc/sys/net/ipv4/tcp_wmem', 'utf8').trim().split(/\s+/)[2]);
    const rmem = Number(readFileSync('/proc/sys/net/ipv4/tcp_rmem', 'utf8').trim().split(/\s+/)[1]);
    return wmem + rmem;
  } catch {
    return 8 * MiB;
  }
})();

interface CountingTarget {
  port: number;
  inFlight: number;
  maxInFlight: number;
  requests: number;
  /** body bytes accepted by res.write (what left the target, or sits in its socket's buffers) */
  written: number;
  reset(): void;
  close(): Promise<void>;
}

/** GET /obj/<n>: after 20 ms, n bytes in 16 KiB writes paced by the reader; counts requests in flight and bytes written. */
async function startCountingTarget(): Promise<CountingTarget> {
  const t: CountingTarget = {
    port: 0,
    inFlight: 0,
    maxInFlight: 0,
    requests: 0,
    written: 0,
    reset() {
      t.maxInFlight = t.inFlight;
      t.requests = 0;
      t.written = 0;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((req, res) => {
    t.requests++;
    t.inFlight++;
    if (t.inFlight > t.maxInFlight) t.maxInFlight = t.inFlight;
    res.once('close', () => t.inFlight--);
    const m = /^\/obj\/(\d+)$/.exec(req.url ?? '');
    let left = m ? Number(m[1]) : 0;
    const pump = (): void => {
      while (left > 0) {
        const n = Math.min(left, PIECE.length);
        left -= n;
        t.written += n;
        if (!res.write(n === PIECE.length ? PIECE : PIECE.subarray(0, n))) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    // A response starts a little after its request (as an origin's would): requests a proxy sends at once
    // overlap at the target, one at a time do not.
    setTimeout(() => {
      if (res.destroyed) return;
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(left) });
      pump();
    }, 20);
  });
  server.on('clientError', (_e, s) => s.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.port = (server.address() as AddressInfo).port;
  return t;
}

/** A raw client connection to the proxy that does not read until told to. */
interface RawClient {
  socket: Socket;
  received: number;
  /** Starts reading; `responses` resolves with each response's status and body size, in order, once `count` are in. */
  read(count: number): Promise<Array<{ status: number; size: number }>>;
  closed: Promise<void>;
}

function rawClient(proxyPort: number): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: proxyPort });
    // Paused before it connects: nothing is read, not even into the stream's own buffer.
    socket.pause();
    socket.once('error', reject);
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    const client: RawClient = {
      socket,
      received: 0,
      closed,
      read(count) {
        return new Promise((done, fail) => {
          let buf: Buffer = Buffer.alloc(0);
          const out: Array<{ status: number; size: number }> = [];
          let need = -1;
          let status = 0;
          const parse = (): void => {
            for (;;) {
              if (need < 0) {
                const end = buf.indexOf('\r\n\r\n');
                if (end < 0) return;
                const head = buf.subarray(0, end).toString('latin1');
                status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
                need = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
                buf = buf.subarray(end + 4);
              }
              if (buf.length < need) return;
              out.push({ status, size: need });
              buf = buf.subarray(need);
              need = -1;
              if (out.length === count) {
                done(out);
                return;
              }
            }
          };
          socket.on('data', (c: Buffer) => {
            client.received += c.length;
            buf = buf.length === 0 ? c : Buffer.concat([buf, c]);
            parse();
          });
          socket.once('close', () =>
            out.length < count ? fail(new Error(`closed after ${out.length} of ${count} responses`)) : undefined,
          );
          socket.resume();
        });
      },
    };
    socket.once('connect', () => resolve(client));
  });
}

function pipelined(targetPort: number, user: string, pass: string, count: number, path = `/obj/${KB200}`): string {
  const auth = Buffer.from(`${user}:${pass}`).toString('base64');
  const one = `GET http://127.0.0.1:${targetPort}${path} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`;
  return one.repeat(count);
}

/** Resolves once `value()` has not changed for `quietMs` (or `stop()` holds); the figure is then stable. */
async function settled(value: () => number, stop: () => boolean = () => false, quietMs = 400): Promise<number> {
  let last = value();
  let since = Date.now();
  return poll(
    () => {
      const v = value();
      if (v !== last) {
        last = v;
        since = Date.now();
      }
      return stop() || Date.now() - since >= quietMs ? v : undefined;
    },
    { timeoutMs: 20_000, everyMs: 20 },
  );
}

describe('pipelined plain-HTTP requests (issue 23 item 1)', () => {
  let gw: Gateway;
  let target: CountingTarget;

  before(async () => {
    gw = await startGateway({ config: { admin: { token: TOKEN }, proxy: { connectTimeoutMs: 3000, pipelineDepth: DEPTH } } });
    target = await startCountingTarget();
  });
  after(async () => {
    await target.close();
    await gw.close();
  });

  async function user(name: string, extra: Record<string, unknown>): Promise<void> {
    const r = await gw.admin('/v1/users', { body: { name, password: `${name}-pass`, mainAccount: 'shop1', ...extra } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    // The route warmed (its first dial may wait for a draw) on a connection of its own.
    const c = await rawClient(gw.ports.http);
    c.socket.write(pipelined(target.port, name, `${name}-pass`, 1, '/obj/10'));
    assert.deepEqual(await c.read(1), [{ status: 200, size: 10 }]);
    c.socket.destroy();
    await c.closed;
    await poll(() => target.inFlight === 0, { timeoutMs: 5000 });
  }

  test('maxConnections 2: two connections pipelining 9 × 2 MB GETs and never reading → at most 2 in flight, the target held back, then every answer whole', async () => {
    await user('pipe2', { maxConnections: 2 });
    target.reset();
    const clients = [await rawClient(gw.ports.http), await rawClient(gw.ports.http)];
    const count = DEPTH + 1;
    for (const c of clients) c.socket.write(pipelined(target.port, 'pipe2', 'pipe2-pass', count, `/obj/${2 * MiB}`));
    await poll(() => target.requests > 0, { timeoutMs: 10_000 });
    const written = await settled(
      () => target.written,
      () => target.maxInFlight > 2,
    );
    // What a client that never reads can still take: its socket's kernel buffers on both ends (Rotor's send
    // buffer grows to tcp_wmem's maximum), the response under way, and Rotor's own bounded slack.
    const bound = 2 * (KERNEL_BUFFERS + 2 * MiB + 256 * 1024);
    console.log(
      `# never-reading clients: ${target.requests} of ${2 * count} requests reached the target, at most ${target.maxInFlight} in flight, ${written} of ${2 * count * 2 * MiB} body bytes written (bound ${bound})`,
    );
    assert.ok(target.maxInFlight <= 2, `requests in flight at the target: ${target.maxInFlight}`);
    assert.ok(written <= bound, `the target wrote ${written} bytes for clients that never read`);
    const answers = await Promise.all(clients.map((c) => c.read(count)));
    for (const a of answers)
      assert.deepEqual(
        a,
        Array.from({ length: count }, () => ({ status: 200, size: 2 * MiB })),
      );
    assert.ok(target.maxInFlight <= 2, `requests in flight at the target: ${target.maxInFlight}`);
    assert.equal(target.requests, 2 * count);
    for (const c of clients) c.socket.destroy();
  });

  test(`past pipelineDepth (${DEPTH}) queued requests the connection is answered 503 and closed`, async () => {
    await user('pipedeep', {});
    target.reset();
    const c = await rawClient(gw.ports.http);
    c.socket.write(pipelined(target.port, 'pipedeep', 'pipedeep-pass', 30, '/obj/1000'));
    const answers = await c.read(DEPTH + 2);
    assert.deepEqual(
      answers.map((a) => a.status),
      [...Array.from({ length: DEPTH + 1 }, () => 200), 503],
      'one in flight and DEPTH queued are served, the next is refused',
    );
    await c.closed;
    assert.equal(target.requests, DEPTH + 1);
  });

  test('a rate-limited user (100 KiB/s) pipelining 10 × 100 KB: the target stays close to what the client received', async () => {
    await user('piperate', { rateBytesPerSec: 100 * 1024 });
    target.reset();
    const c = await rawClient(gw.ports.http);
    c.socket.write(pipelined(target.port, 'piperate', 'piperate-pass', 10, '/obj/102400'));
    const all = c.read(10).catch(() => undefined);
    await poll(() => c.received >= 50 * 1024, { timeoutMs: 15_000, everyMs: 5 });
    const ahead = target.written - c.received;
    console.log(
      `# rate-limited pipelining: client received ${c.received}, target wrote ${target.written} (${ahead} ahead), ${target.requests} requests reached the target`,
    );
    assert.ok(target.requests <= 2, `${target.requests} requests reached the target while the first response was under way`);
    assert.ok(ahead <= 512 * 1024, `the target is ${ahead} bytes ahead of the client`);
    c.socket.destroy();
    await all;
    await c.closed;
  });
});
