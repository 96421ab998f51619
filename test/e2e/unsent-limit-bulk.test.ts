// Bulk tunnels on the real daemon, both listeners, both directions: a side that fills node's reads switches to a
// read buffer of its own that is used again (src/proxy/paced-reads.ts bulkReads), and a client that keeps taking
// a download gets a larger unsent bound (src/proxy/unsent-limit.ts unsentBulk). What arrives must be what was
// sent, byte for byte, also when the reader keeps stopping (chunks are then lent to writes that wait).
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startGateway, type Gateway } from './harness.ts';
import { socks5Connect } from '../support/socks5-connect.ts';

const TOKEN = 'unsent-bulk-token-7d21';
const USER = 'bulky';
const PASS = 'bulky-pass';
const MIB = 16;
const noise = randomBytes(1 << 20);

/** The i-th MiB of a transfer: differs from every other (a chunk overwritten or sent twice shows in the hash). */
function mib(i: number): Buffer {
  const b = Buffer.from(noise);
  for (let j = 0; j < b.length; j += 1024) b.writeUInt32LE(i, j);
  return b;
}

/** Writes MIB MiB to `socket` with backpressure, then ends it; resolves with their hash. */
async function send(socket: Socket): Promise<string> {
  const hash = createHash('sha256');
  for (let i = 0; i < MIB; i++) {
    const b = mib(i);
    hash.update(b);
    if (!socket.write(b)) await once(socket, 'drain');
  }
  socket.end();
  return hash.digest('hex');
}

/** Reads `socket` to its end, stopping for a turn of the event loop every 2 MiB; resolves with the hash and count. */
function receive(socket: Socket, head: Buffer | null): Promise<{ hash: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  let nextStop = 2 << 20;
  const take = (chunk: Buffer): void => {
    hash.update(chunk);
    bytes += chunk.length;
    if (bytes < nextStop) return;
    nextStop += 2 << 20;
    socket.pause();
    setImmediate(() => socket.resume());
  };
  if (head && head.length > 0) take(head);
  socket.on('data', take);
  socket.resume();
  return once(socket, 'end').then(() => ({ hash: hash.digest('hex'), bytes }));
}

describe('bulk tunnels through both listeners arrive intact', () => {
  let gw: Gateway;
  let target: Server;
  let port = 0;
  const sockets = new Set<Socket>();

  before(async () => {
    gw = await startGateway({ config: { admin: { token: TOKEN } } });
    // 'D': the target sends MIB MiB and ends; 'U': it reads to the end and answers the hash of what it got.
    target = createServer({ allowHalfOpen: true }, (s) => {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
      s.once('data', (first: Buffer) => {
        if (first[0] === 0x44) {
          void send(s);
          return;
        }
        void receive(s, first.subarray(1)).then((r) => s.end(`${r.hash} ${r.bytes}`));
      });
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    port = (target.address() as AddressInfo).port;
    const r = await gw.admin('/v1/users', { body: { name: USER, password: PASS, mainAccount: 'shop1' } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => target.close(() => resolve()));
    await gw.close();
  });

  /** A tunnel to the target through the listener: the socket, and the bytes read behind the proxy's answer. */
  async function open(via: 'connect' | 'socks5'): Promise<{ socket: Socket; head: Buffer | null }> {
    if (via === 'socks5') {
      const socket = connect({ host: '127.0.0.1', port: gw.ports.socks5, allowHalfOpen: true });
      await once(socket, 'connect');
      const head = await new Promise<Buffer | null>((resolve, reject) =>
        socks5Connect(socket, { host: '127.0.0.1', port }, { username: USER, password: PASS }, (err, h) =>
          err ? reject(err) : resolve(h),
        ),
      );
      return { socket, head };
    }
    const socket = connect({ host: '127.0.0.1', port: gw.ports.http, allowHalfOpen: true });
    const auth = Buffer.from(`${USER}:${PASS}`).toString('base64');
    socket.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
    let got = Buffer.alloc(0);
    for (;;) {
      const [chunk] = (await once(socket, 'data')) as [Buffer];
      got = Buffer.concat([got, chunk]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) continue;
      assert.match(got.subarray(0, end).toString('latin1'), /^HTTP\/1\.1 200/);
      socket.pause();
      return { socket, head: got.subarray(end + 4) };
    }
  }

  for (const via of ['connect', 'socks5'] as const) {
    test(`${via}: a download through a client that keeps stopping`, async () => {
      const { socket, head } = await open(via);
      socket.write('D');
      const r = await receive(socket, head);
      socket.destroy();
      assert.equal(r.bytes, MIB << 20);
      const expected = createHash('sha256');
      for (let i = 0; i < MIB; i++) expected.update(mib(i));
      assert.equal(r.hash, expected.digest('hex'));
    });

    test(`${via}: an upload`, async () => {
      const { socket, head } = await open(via);
      socket.write('U');
      const chunks: Buffer[] = head && head.length > 0 ? [head] : [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.resume();
      const ended = once(socket, 'end');
      const sent = await send(socket);
      await ended;
      socket.destroy();
      assert.equal(Buffer.concat(chunks).toString('latin1'), `${sent} ${MIB << 20}`, 'the target got what was sent');
    });
  }
});
