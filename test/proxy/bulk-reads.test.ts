// Bulk reads (src/proxy/paced-reads.ts bulkReads): a relay's side that fills node's 64 KiB reads is switched to a
// read buffer of its own, used again while the other socket takes each chunk at once. The buffer is shared by
// every read of that socket, so the risk is a chunk overwritten while a write still holds it: these tests move
// patterned data both ways through real sockets with a client that stops reading again and again (the writes
// then do not finish at once and the chunks are lent), and compare what arrives, byte for byte. A bulk socket
// reads up to BULK_READ (more than node's 64 KiB) while the other side takes each chunk at once, and holds only a
// small buffer while it waits: after its burst, or while the other side does not take what it was given.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import { BULK_IDLE_READ, BULK_READ, NODE_READ, bulkReadSize, isBulk } from '../../src/proxy/paced-reads.ts';
import { relay, type RelayStats } from '../../src/proxy/relay.ts';
import { sockoptBinding } from '../../src/proxy/socket-options.ts';
import { UnlimitedMeters } from '../support/meters.ts';

const TOTAL = 24;
const SOL_SOCKET = 1;
const SO_SNDBUF = 7;
const SO_RCVBUF = 8;
const servers: Server[] = [];
after(() => servers.forEach((s) => s.close()));

async function socketPair(): Promise<{ near: Socket; far: Socket }> {
  const server = createServer({ allowHalfOpen: true });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const accepted = once(server, 'connection');
  const near = connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, allowHalfOpen: true });
  const [far] = (await accepted) as [Socket];
  if (near.connecting) await once(near, 'connect');
  return { near, far };
}

/** A relay between two socket pairs: `client` is the application's end, `target` the upstream's far end. */
async function tunnel(limitBytes?: number): Promise<{
  client: Socket;
  target: Socket;
  relayClient: Socket;
  relayUpstream: Socket;
  ended: Promise<RelayStats>;
}> {
  const c = await socketPair();
  const u = await socketPair();
  const meters = new UnlimitedMeters(limitBytes === undefined ? undefined : new Map([['bulk', limitBytes]]));
  const ended = new Promise<RelayStats>((resolve) =>
    relay(c.far, u.near, { meter: meters.meter('bulk'), idleTimeoutMs: 30_000, end: { relayEnded: resolve } }),
  );
  return { client: c.near, target: u.far, relayClient: c.far, relayUpstream: u.near, ended };
}

const noise = randomBytes(1 << 20);

/** 1 MiB that differs from one MiB to the next (a chunk written twice or overwritten shows in the hash). */
function mib(i: number): Buffer {
  const b = Buffer.from(noise);
  for (let j = 0; j < b.length; j += 1024) b.writeUInt32LE(i, j);
  return b;
}

/** Resolves on the first turn of the event loop on which `ready()` holds. */
function until(ready: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => void (ready() ? resolve() : setImmediate(check));
    check();
  });
}

/**
 * Sends `total` MiB from `from` through the relay (`source` and `sink` are its sockets) and reads them at `to`.
 * Every 4 MiB `to` stops reading until the relay's own write towards it is left unfinished (`sink` holds bytes):
 * the chunks the relay read meanwhile are lent to that write while the relay's next reads go on.
 * The reader stops at most every 4 MiB, and resumes at once after the last byte is sent.
 */
async function move(
  from: Socket,
  source: Socket,
  sink: Socket,
  to: Socket,
  total: number,
): Promise<{ sent: string; got: string; bytes: number }> {
  // Fixed kernel buffers on both hops (`source` and `sink` are the relay's sockets). Autotuned, they can grow to
  // several MiB: a stop's bytes would then all fit, the relay's write would finish at once, or the writer would
  // be done before the relay stalls. Fixed, only the last stop can find the writer done.
  const lib = sockoptBinding();
  assert.ok(lib, 'sockopt loads on Linux');
  for (const [socket, option] of [
    [from, SO_SNDBUF],
    [source, SO_RCVBUF],
    [sink, SO_SNDBUF],
    [to, SO_RCVBUF],
  ] as const)
    lib.setsockopt(socket, SOL_SOCKET, option, 128 * 1024);
  const sent = createHash('sha256');
  const got = createHash('sha256');
  let bytes = 0;
  let stops = 0;
  let written = false;
  let nextStop = 4 << 20;
  to.on('data', (chunk: Buffer) => {
    got.update(chunk);
    bytes += chunk.length;
    if (bytes < nextStop || bytes >= total << 20) return;
    nextStop += 4 << 20;
    to.pause();
    // Once everything is sent the last bytes may all fit in the kernel's buffers: no write is left then.
    void until(() => sink.writableLength > 0 || written).then(() => {
      if (sink.writableLength > 0) stops += 1;
      to.resume();
    });
  });
  const ended = once(to, 'end');
  for (let i = 0; i < total; i++) {
    const b = mib(i);
    sent.update(b);
    if (!from.write(b)) await once(from, 'drain');
  }
  from.end();
  written = true;
  await ended;
  assert.ok(stops >= total / 4 - 2, `the reader stopped ${stops} times`);
  return { sent: sent.digest('hex'), got: got.digest('hex'), bytes };
}

/** The largest chunk `socket` (a relay's side) has read so far. */
function largestRead(socket: Socket): () => number {
  let largest = 0;
  socket.on('data', (chunk: Buffer) => {
    if (chunk.length > largest) largest = chunk.length;
  });
  return () => largest;
}

describe('bulk reads on a relay', { skip: process.platform !== 'linux' }, () => {
  test('a download arrives intact through a client that keeps stopping; the upstream side reads in bulk', async () => {
    const t = await tunnel();
    const largest = largestRead(t.relayUpstream);
    const r = await move(t.target, t.relayUpstream, t.relayClient, t.client, TOTAL);
    assert.equal(r.bytes, TOTAL << 20);
    assert.equal(r.got, r.sent);
    assert.equal(isBulk(t.relayUpstream), true, 'the upstream socket was switched to bulk reads');
    // After each stop the kernel holds more than node's read: a bulk read takes more of it at once.
    assert.ok(largest() > NODE_READ && largest() <= BULK_READ, `the largest read was ${largest()} B`);
    t.client.end();
    const stats = await t.ended;
    t.target.destroy();
    assert.equal(stats.down, TOTAL << 20);
  });

  test('an upload arrives intact through an upstream that keeps stopping; the client side reads in bulk', async () => {
    const t = await tunnel();
    const largest = largestRead(t.relayClient);
    const r = await move(t.client, t.relayClient, t.relayUpstream, t.target, TOTAL);
    assert.equal(r.bytes, TOTAL << 20);
    assert.equal(r.got, r.sent);
    assert.equal(isBulk(t.relayClient), true, 'the client socket was switched to bulk reads');
    assert.ok(largest() > NODE_READ && largest() <= BULK_READ, `the largest read was ${largest()} B`);
    t.target.end();
    const stats = await t.ended;
    t.client.destroy();
    assert.equal(stats.up, TOTAL << 20);
  });

  test("a user whose connections can be cut keeps node's reads: the download stops within one of them of the limit", async () => {
    const limit = 8 << 20;
    const t = await tunnel(limit);
    let got = 0;
    t.client.on('data', (b: Buffer) => (got += b.length));
    // The relay ends the client side after the cut (FIN or reset): all it delivered has arrived by then.
    const closed = new Promise((resolve) => {
      t.client.once('end', resolve);
      t.client.once('close', resolve);
    });
    t.target.on('error', () => undefined);
    const block = mib(1);
    const pump = (): void => {
      while (!t.target.destroyed && t.target.write(block));
    };
    t.target.on('drain', pump);
    pump();
    const stats = await t.ended;
    await closed;
    t.target.destroy();
    assert.equal(stats.end, 'limit');
    assert.equal(isBulk(t.relayUpstream), false, 'a bounded user is not switched to bulk reads');
    // Short of the limit by at most two of node's reads: the one that crossed it (dropped) and one the client's
    // socket had not yet taken when the cut destroyed it (the relay pauses the upstream on the first write not
    // taken at once). With bulk reads either could be 256 KiB.
    assert.ok(got <= limit && got >= limit - 2 * NODE_READ, `the client got ${got} B of a ${limit} B limit`);
  });

  test('a small exchange keeps node reads on both sides (an idle tunnel holds no read buffer of its own)', async () => {
    const t = await tunnel();
    const got = once(t.target, 'data');
    t.client.write('GET / HTTP/1.1\r\n\r\n');
    await got;
    const back = once(t.client, 'data');
    t.target.write(Buffer.alloc(4096, 1));
    await back;
    assert.equal(isBulk(t.relayUpstream), false);
    assert.equal(isBulk(t.relayClient), false);
    t.client.destroy();
    t.target.destroy();
    await t.ended;
  });
  test('a bulk socket whose burst ended waits on a small read buffer, and takes a big one when a burst starts again', async () => {
    const t = await tunnel();
    const got = createHash('sha256');
    const sent = createHash('sha256');
    let bytes = 0;
    t.client.on('data', (chunk: Buffer) => {
      got.update(chunk);
      bytes += chunk.length;
    });
    const send = async (b: Buffer): Promise<void> => {
      sent.update(b);
      const target = bytes + b.length;
      t.target.write(b);
      await until(() => bytes >= target);
    };
    await send(mib(1));
    assert.equal(isBulk(t.relayUpstream), true, 'a burst switches the upstream side to bulk reads');
    // A short read after the burst: the kernel's queue drained, the socket may now wait for minutes.
    await send(Buffer.alloc(100, 7));
    assert.equal(bulkReadSize(t.relayUpstream), BULK_IDLE_READ);
    // A new burst fills the small buffer and takes a full one again; its tail drains back to the small one.
    await send(Buffer.concat([mib(2), Buffer.alloc(10, 9)]));
    await send(Buffer.alloc(100, 8));
    assert.equal(bulkReadSize(t.relayUpstream), BULK_IDLE_READ);
    assert.equal(got.digest('hex'), sent.digest('hex'));
    t.client.destroy();
    t.target.destroy();
    await t.ended;
  });

  test('a burst after a wait reads in bulk again', async () => {
    const t = await tunnel();
    let bytes = 0;
    let large = 0;
    t.client.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    const upstream = t.relayUpstream;
    upstream.on('data', (chunk: Buffer) => {
      if (chunk.length >= NODE_READ) large += chunk.length;
    });
    t.target.write(mib(1));
    await until(() => bytes >= 1 << 20);
    t.target.write(Buffer.alloc(100));
    await until(() => bytes >= (1 << 20) + 100);
    assert.equal(bulkReadSize(upstream), BULK_IDLE_READ);
    const before = large;
    t.target.write(Buffer.concat([mib(3), mib(4), mib(5), mib(6)]));
    await until(() => bytes >= (5 << 20) + 100);
    // Reads of 64 KiB and more carry the new burst (a socket left on its small buffer would read 4 KiB at a time).
    assert.ok(large - before >= 3 << 20, `bytes read 64 KiB or more at a time after the wait: ${large - before}`);
    t.client.destroy();
    t.target.destroy();
    await t.ended;
  });

  test('an upload whose burst ended leaves the client side on a small read buffer', async () => {
    const t = await tunnel();
    let bytes = 0;
    t.target.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    t.client.write(mib(1));
    await until(() => bytes >= 1 << 20);
    assert.equal(isBulk(t.relayClient), true, 'a burst switches the client side to bulk reads');
    t.client.write(Buffer.alloc(100, 3));
    await until(() => bytes >= (1 << 20) + 100);
    assert.equal(bulkReadSize(t.relayClient), BULK_IDLE_READ);
    t.client.destroy();
    t.target.destroy();
    await t.ended;
  });

  test('a client that stops reading leaves the upstream side on a small read buffer (a stalled tunnel holds little)', async () => {
    const t = await tunnel();
    const got = createHash('sha256');
    let bytes = 0;
    t.client.on('data', (chunk: Buffer) => {
      got.update(chunk);
      bytes += chunk.length;
      if (bytes >= 2 << 20 && bytes - chunk.length < 2 << 20) t.client.pause();
    });
    // The target sends until the relay's write to the client is left unfinished, the relay has stopped reading
    // the upstream, and node's reads into the paused socket's readable buffer have begun (how much that takes
    // depends on the kernel's buffers on both hops).
    const stalled = (): boolean =>
      t.client.isPaused() && t.relayClient.writableLength > 0 && t.relayUpstream.isPaused() && t.relayUpstream.readableLength > 0;
    const sent = createHash('sha256');
    let sentBytes = 0;
    for (let i = 0; !stalled(); i++) {
      const b = mib(i);
      sent.update(b);
      sentBytes += b.length;
      if (!t.target.write(b)) await until(() => t.target.writableLength === 0 || stalled());
    }
    assert.equal(isBulk(t.relayUpstream), true, 'the upstream side was carrying bulk data');
    // Each read into the paused socket found its chunk kept: the next one lands in the small buffer.
    assert.equal(bulkReadSize(t.relayUpstream), BULK_IDLE_READ);
    // Reading again, the client gets every byte in order.
    t.client.resume();
    await until(() => bytes >= sentBytes);
    assert.equal(bytes, sentBytes);
    assert.equal(got.digest('hex'), sent.digest('hex'));
    t.client.destroy();
    t.target.destroy();
    await t.ended;
  });

  test("an error on a relay's socket after the relay ended is absorbed, and the end is reported once", async () => {
    const c = await socketPair();
    const u = await socketPair();
    const ends: RelayStats[] = [];
    const r = relay(c.far, u.near, {
      meter: new UnlimitedMeters().meter('late'),
      idleTimeoutMs: 30_000,
      end: { relayEnded: (s) => ends.push(s) },
    });
    r.stop();
    // A reset racing the destroy: without a listener left on the socket this would throw (an uncaught 'error').
    c.far.emit('error', new Error('late reset'));
    u.near.emit('error', new Error('late reset'));
    assert.equal(ends.length, 1);
    assert.equal(ends[0]!.end, 'stopped');
    c.near.destroy();
    u.far.destroy();
  });
});
