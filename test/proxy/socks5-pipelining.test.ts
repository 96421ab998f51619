// Optimistic SOCKS5 handshakes: greeting, RFC 1929 auth and CONNECT in one write where the upstream takes
// them, the step-by-step handshake (remembered per upstream) where it drops pipelined bytes, as microsocks
// does. A relay between the dialer and the upstream counts the dialer's turns: a turn is a write of the
// dialer's that follows an answer of the upstream's (or opens the connection), i.e. a round trip paid.
import assert from 'node:assert/strict';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { socks5Pipelining } from '../../src/proxy/dial-socks5.ts';
import { dialSocks5 } from '../../src/proxy/upstream-dial.ts';
import { UpstreamDialError } from '../../src/proxy/errors.ts';
import { WarmConnections } from '../../src/proxy/warm.ts';
import { poll } from '../support/wait.ts';
import { acceptSocks5, REPLY, writeReply } from '../../src/wire/socks5.ts';
import { node, startMicrosocks, startTarget, type Child } from './fixtures.ts';

interface Relay {
  port: number;
  /** per accepted connection, the dialer's turns so far */
  turns: number[];
  close: () => Promise<void>;
}

/** A TCP relay in front of `upstreamPort` that forwards every chunk as it came and counts the dialer's turns. */
async function turnRelay(upstreamPort: number): Promise<Relay> {
  const turns: number[] = [];
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    const i = turns.push(0) - 1;
    let last: 'client' | 'server' | undefined;
    const up = connect({ host: '127.0.0.1', port: upstreamPort });
    for (const s of [client, up]) {
      open.add(s);
      s.once('close', () => open.delete(s));
      s.on('error', () => {
        client.destroy();
        up.destroy();
      });
    }
    client.on('data', (c: Buffer) => {
      if (last !== 'client') turns[i]!++;
      last = 'client';
      up.write(c);
    });
    up.on('data', (c: Buffer) => {
      last = 'server';
      client.write(c);
    });
    client.on('end', () => up.end());
    up.on('end', () => client.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    turns,
    close: () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A SOCKS5 upstream with user/password built on Rotor's own server side (which reads pipelined bytes). */
async function bufferingUpstream(): Promise<{ port: number; close: () => Promise<void> }> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    acceptSocks5(socket, {
      timeoutMs: 10_000,
      auth: 'password',
      authenticate: (u, p) => (u === 'up' && p === 'uppass' ? { ok: true, context: undefined } : { ok: false }),
    }).then(
      (req) => {
        if (req.port === 1) return writeReply(socket, REPLY.connectionRefused);
        writeReply(socket, REPLY.succeeded, { host: '127.0.0.1', port: 1 });
        socket.end('tunnel-open');
      },
      () => socket.destroy(),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, close: () => new Promise<void>((r) => server.close(() => r())) };
}

function readAll(socket: Socket, head: Buffer | null): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = head ? [head] : [];
    socket.on('data', (c: Buffer) => parts.push(c));
    socket.once('end', () => {
      socket.destroy();
      resolve(Buffer.concat(parts).toString());
    });
    socket.once('error', reject);
    socket.resume();
  });
}

const opts = { connectTimeoutMs: 10_000, handshakeTimeoutMs: 10_000 };

describe('optimistic SOCKS5 handshakes', () => {
  let target: Awaited<ReturnType<typeof startTarget>>;
  let micro: Child;
  let buffering: Awaited<ReturnType<typeof bufferingUpstream>>;
  before(async () => {
    target = await startTarget();
    micro = await startMicrosocks('up', 'uppass');
    buffering = await bufferingUpstream();
  });
  after(async () => {
    await micro.stop();
    await buffering.close();
    await target.close();
  });

  test('an upstream that reads pipelined bytes gets greeting, auth and CONNECT in one write', async () => {
    const relay = await turnRelay(buffering.port);
    try {
      const n = node('socks5', relay.port, 'up', 'uppass');
      const t = await dialSocks5(n, { host: '127.0.0.1', port: 80 }, opts);
      assert.deepEqual(relay.turns, [1], 'one connection, one turn of the dialer before the tunnel is up');
      assert.equal(t.exit, '127.0.0.1', "the reply's BND.ADDR is the tunnel's exit, pipelined or not");
      assert.equal(await readAll(t.socket, t.head), 'tunnel-open');
      assert.equal(socks5Pipelining(n), 'pipelined');
      // A refused CONNECT on a pipelined handshake is the target's answer, not a reason to fall back.
      await assert.rejects(
        dialSocks5(n, { host: '127.0.0.1', port: 1 }, opts),
        (e: unknown) => e instanceof UpstreamDialError && e.reason === 'target_refused',
      );
      assert.deepEqual(relay.turns, [1, 1]);
      assert.equal(socks5Pipelining(n), 'pipelined');
    } finally {
      await relay.close();
    }
  });

  test('wrong credentials on a pipelined handshake are an auth failure, and nothing is learned', async () => {
    const relay = await turnRelay(buffering.port);
    try {
      const n = node('socks5', relay.port, 'up', 'nope');
      await assert.rejects(
        dialSocks5(n, { host: '127.0.0.1', port: 80 }, opts),
        (e: unknown) => e instanceof UpstreamDialError && e.reason === 'auth',
      );
      assert.deepEqual(relay.turns, [1]);
      assert.equal(socks5Pipelining(n), 'unknown');
    } finally {
      await relay.close();
    }
  });

  test('microsocks drops pipelined bytes: the dial falls back to one message at a time and the node is remembered', async () => {
    const relay = await turnRelay(micro.port);
    try {
      const n = node('socks5', relay.port, 'up', 'uppass');
      const first = await dialSocks5(n, { host: '127.0.0.1', port: target.port }, opts);
      const turns = [...relay.turns];
      first.socket.write(`GET /hello HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\nConnection: close\r\n\r\n`);
      assert.match(await readAll(first.socket, first.head), /hello from target$/);
      // The pipelined attempt (one turn, then silence after the method answer), then greeting, auth, CONNECT.
      assert.deepEqual(turns, [1, 3]);
      assert.equal(socks5Pipelining(n), 'stepwise');
      // Remembered: the next dial goes step by step at once, on one connection.
      const second = await dialSocks5({ ...n }, { host: '127.0.0.1', port: target.port }, opts);
      assert.deepEqual(relay.turns.slice(2), [3]);
      second.socket.write(`GET /hello HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\nConnection: close\r\n\r\n`);
      assert.match(await readAll(second.socket, second.head), /hello from target$/);
    } finally {
      await relay.close();
    }
  });

  test('warm connections to an upstream not known to drop pipelined bytes are greeted and authenticated in one write', async () => {
    const relay = await turnRelay(buffering.port);
    const warm = new WarmConnections({ perNode: 2, maxPerPool: 4, idleMs: 60_000, connectTimeoutMs: 10_000, handshakeTimeoutMs: 10_000 });
    try {
      const n = node('socks5', relay.port, 'up', 'uppass');
      const fresh = await warm.socks5(n, { host: '127.0.0.1', port: 80 }, opts);
      assert.equal(await readAll(fresh.socket, fresh.head), 'tunnel-open');
      assert.equal(socks5Pipelining(n), 'pipelined');
      await poll(() => warm.size >= 1, { what: 'a warm connection ready', timeoutMs: 10_000, everyMs: 10 });
      // Ready: greeting and auth went in one turn.
      assert.ok(
        relay.turns.slice(1).every((t) => t === 1),
        `warm connections' turns: ${relay.turns.join(',')}`,
      );
      const t = await warm.socks5(n, { host: '127.0.0.1', port: 80 }, opts);
      assert.equal(await readAll(t.socket, t.head), 'tunnel-open');
      // The tunnel on a warm connection paid one more turn (the CONNECT): two on that connection in all.
      assert.ok(relay.turns.includes(2) && relay.turns.every((x) => x <= 2), `turns: ${relay.turns.join(',')}`);
    } finally {
      warm.close();
      await relay.close();
    }
  });

  test('an upstream without credentials keeps the step-by-step handshake (no answer to detect a drop by)', async () => {
    const n = node('socks5', micro.port);
    // microsocks here requires auth: the greeting offering no auth is refused, as before.
    await assert.rejects(dialSocks5(n, { host: '127.0.0.1', port: target.port }, opts), (e: unknown) => e instanceof UpstreamDialError);
    assert.equal(socks5Pipelining(n), 'unknown');
  });
});
