// The SOCKS5 client handshake over real loopback sockets (the sans-I/O client driven by test/support/socks5-connect.ts):
// against our own server side (acceptSocks5) and against scripted servers that answer in pieces, refuse, or speak
// something else; and the client itself, fed bytes, returning what happened and calling nothing.
import assert from 'node:assert/strict';
import { connect, createServer, isIPv4, type AddressInfo, type Server, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import {
  DONE,
  FAILED,
  MORE,
  Socks5ClientError,
  connectRequest,
  socks5Connect as socks5Client,
  socks5Greet,
} from '../../src/wire/socks5-client.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import { acceptSocks5, writeReply, REPLY } from '../../src/wire/socks5.ts';
import { ipv4Value } from '../../src/wire/ip-bytes.ts';

const open = new Map<Server, Set<Socket>>();

function listen(onSocket: (s: Socket) => void): Promise<{ server: Server; port: number }> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    onSocket(s);
  });
  open.set(server, sockets);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as AddressInfo).port })));
}

function close(server: Server): Promise<void> {
  for (const s of open.get(server) ?? []) s.destroy();
  open.delete(server);
  return new Promise((resolve) => server.close(() => resolve()));
}

function dial(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

function run(
  socket: Socket,
  target: { host: string; port: number },
  creds?: { username: string; password: string },
): Promise<{ err: Socks5ClientError | null; head: Buffer | null }> {
  return new Promise((resolve) => socks5Connect(socket, target, creds, (err, head) => resolve({ err, head })));
}

/** A server that reads everything and answers with `script(received)` parts, one write each. */
async function scripted(answer: (received: Buffer, s: Socket) => void): Promise<{ server: Server; port: number }> {
  return listen((s) => {
    s.on('error', () => {});
    s.on('data', (chunk: Buffer) => answer(chunk, s));
  });
}

describe('SOCKS5 client', () => {
  test('against our own server: user/pass, domain target, request fields and the head behind the reply', async () => {
    const seen: Array<{ host: string; port: number; user: string }> = [];
    const { server, port } = await listen((s) => {
      void acceptSocks5<string>(s, {
        timeoutMs: 1000,
        auth: 'password',
        authenticate: (u, p) => (u === 'up' && p === 'pässword' ? { ok: true, context: u } : { ok: false }),
      }).then(
        (r) => {
          seen.push({ host: r.host, port: r.port, user: r.username });
          // Reply and the target's first bytes in one write: they must come back as head.
          s.write(Buffer.concat([Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]), Buffer.from('BANNER')]));
        },
        () => {},
      );
    });
    try {
      const socket = await dial(port);
      const r = await run(socket, { host: 'example.test', port: 8443 }, { username: 'up', password: 'pässword' });
      assert.equal(r.err, null);
      assert.equal(r.head?.toString(), 'BANNER');
      assert.equal(socket.isPaused(), true);
      assert.equal(socket.listenerCount('data'), 0);
      assert.deepEqual(seen, [{ host: 'example.test', port: 8443, user: 'up' }]);
      socket.destroy();

      const bad = await dial(port);
      const f = await run(bad, { host: '127.0.0.1', port: 80 }, { username: 'up', password: 'wrong' });
      assert.equal(f.err?.code, 'AUTH_FAILED');
      assert.doesNotMatch(f.err?.message ?? '', /wrong/);
      bad.destroy();
    } finally {
      await close(server);
    }
  });

  test('answers split into single bytes, no-auth method chosen, IPv6 bound address', async () => {
    const { server, port } = await listen((s) => {
      s.on('error', () => {});
      let stage = 0;
      s.on('data', () => {
        const answer = stage++ === 0 ? [5, 0] : [5, 0, 0, 4, ...Array<number>(16).fill(0), 0, 80, 0x41];
        // One byte per write, with a pause, so the client must reassemble; the reply's last byte and the first
        // payload byte ('A') travel in one write, so the payload is deterministically behind the reply in the
        // chunk that completes it (sent apart, whether it arrived before the client finished was a race).
        let i = 0;
        const next = (): void => {
          if (i >= answer.length) return;
          const part = i === answer.length - 2 ? answer.slice(i) : [answer[i]!];
          i += part.length;
          s.write(Buffer.from(part), () => setTimeout(next, 1));
        };
        next();
      });
    });
    try {
      const socket = await dial(port);
      const r = await run(socket, { host: '::1', port: 443 }, { username: 'u', password: 'p' });
      assert.equal(r.err, null);
      assert.equal(r.head?.toString(), 'A');
      socket.destroy();
    } finally {
      await close(server);
    }
  });

  test('refusals and foreign answers are typed', async () => {
    const cases: Array<{ answer: number[][]; code: string; reply?: number }> = [
      { answer: [[5, 0xff]], code: 'NO_ACCEPTABLE_METHOD' },
      { answer: [[5, 0x01]], code: 'BAD_REPLY' },
      { answer: [[0x48, 0x54]], code: 'BAD_REPLY' },
      {
        answer: [
          [5, 2],
          [1, 0],
          [5, REPLY.connectionRefused, 0, 1, 0, 0, 0, 0, 0, 0],
        ],
        code: 'REJECTED',
        reply: REPLY.connectionRefused,
      },
      {
        answer: [
          [5, 2],
          [1, 0],
          [5, 0, 0, 9],
        ],
        code: 'BAD_REPLY',
      },
    ];
    for (const c of cases) {
      const { server, port } = await scripted((_, s) => {
        const part = c.answer.shift();
        if (part) s.write(Buffer.from(part));
      });
      try {
        const socket = await dial(port);
        const r = await run(socket, { host: '127.0.0.1', port: 1 }, { username: 'u', password: 'p' });
        assert.equal(r.err?.code, c.code, JSON.stringify(c));
        if (c.reply !== undefined) assert.equal(r.err?.reply, c.reply);
        socket.destroy();
      } finally {
        await close(server);
      }
    }
  });

  test('the server closing mid-handshake is CLOSED; the returned detach silences a cancelled dial', async () => {
    const { server, port } = await scripted((_, s) => s.end());
    try {
      const socket = await dial(port);
      const r = await run(socket, { host: '127.0.0.1', port: 1 });
      assert.equal(r.err?.code, 'CLOSED');
      socket.destroy();

      const silent = await listen((s) => s.on('error', () => {}));
      const quiet = await dial(silent.port);
      let called = false;
      const detach = socks5Connect(quiet, { host: '127.0.0.1', port: 1 }, undefined, () => (called = true));
      detach();
      quiet.destroy();
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(called, false);
      assert.equal(quiet.listenerCount('data'), 0);
      await close(silent.server);
    } finally {
      await close(server);
    }
  });

  test('request encoding: IPv4, IPv6 (with an IPv4 tail), domain; unencodable targets refused', async () => {
    assert.deepEqual([...connectRequest('10.1.2.3', 258)!], [5, 1, 0, 1, 10, 1, 2, 3, 1, 2]);
    const v6 = connectRequest('::ffff:1.2.3.4', 1)!;
    assert.deepEqual([...v6.subarray(3, 22)], [4, ...Array<number>(10).fill(0), 0xff, 0xff, 1, 2, 3, 4, 0, 1]);
    assert.deepEqual([...connectRequest('a.b', 1)!], [5, 1, 0, 3, 3, 0x61, 0x2e, 0x62, 0, 1]);
    assert.equal(connectRequest('x'.repeat(256), 1), undefined);
    assert.equal(connectRequest('a.b', 0), undefined);
    const { server, port } = await listen((s) => s.on('error', () => {}));
    try {
      const socket = await dial(port);
      const r = await run(socket, { host: 'a.b', port: 1 }, { username: 'u'.repeat(256), password: '' });
      assert.equal(r.err?.code, 'BAD_REQUEST');
      socket.destroy();
    } finally {
      await close(server);
    }
  });

  test('an IPv4 target is what net.isIPv4 takes, and is encoded as its four octets', () => {
    const cases = [
      '0.0.0.0',
      '255.255.255.255',
      '127.0.0.1',
      '1.2.3.4',
      '10.01.2.3',
      '1.2.3.256',
      '1.2.3',
      '1.2.3.4.5',
      '1..2.3',
      '.1.2.3',
      '1.2.3.',
      '1.2.3.4 ',
      'a.b.c.d',
      '01.2.3.4',
      '1.2.3.00',
      '1.2.3.0',
      '999.1.1.1',
      '1.2.3.4a',
      '',
      '::1',
      '1.2.3.-4',
    ];
    // Random near misses and hits: 3 to 5 parts of 0 to 3 random digits (leading zeros, octets over 255, empty parts).
    let seed = 7;
    const next = (k: number) => (seed = (seed * 48271) % 2147483647) % k;
    for (let i = 0; i < 20_000; i++) {
      const parts: string[] = [];
      for (let p = 3 + (next(8) === 0 ? 2 * next(2) : 1); p > 0; p--) {
        let d = '';
        for (let n = next(10) === 0 ? 0 : 1 + next(3); n > 0; n--) d += String(next(10));
        parts.push(d);
      }
      cases.push(parts.join('.'));
    }
    let hits = 0;
    for (const host of cases) {
      const v = ipv4Value(host);
      assert.equal(v >= 0, isIPv4(host), host);
      if (v < 0) continue;
      hits++;
      assert.equal(
        v,
        host.split('.').reduce((a, o) => a * 256 + Number(o), 0),
        host,
      );
      assert.deepEqual([...connectRequest(host, 80)!], [5, 1, 0, 1, ...host.split('.').map(Number), 0, 80], host);
    }
    assert.ok(hits > 1000, `${hits} addresses among the cases`);
  });

  test('writeReply of our server side and the client agree on a failure code', async () => {
    const { server, port } = await listen((s) => {
      void acceptSocks5(s, { timeoutMs: 1000, auth: 'none' }).then(
        () => writeReply(s, REPLY.notAllowed),
        () => {},
      );
    });
    try {
      const socket = await dial(port);
      const r = await run(socket, { host: '127.0.0.1', port: 9 });
      assert.equal(r.err?.code, 'REJECTED');
      assert.equal(r.err?.reply, REPLY.notAllowed);
      socket.destroy();
    } finally {
      await close(server);
    }
  });
  test('sans I/O: fed the answers, the client returns more / done / failed and says what to write, calling nothing', () => {
    const creds = { username: 'u', password: 'p' };
    const c = socks5Client({ host: '10.0.0.1', port: 80 }, creds);
    assert.deepEqual([...c.start()!], [5, 2, 0, 2]);
    // The method answer in two pieces: nothing to write until it is whole, then the RFC 1929 request.
    assert.equal(c.feed(Buffer.from([5])), MORE);
    assert.equal(c.out, null);
    assert.equal(c.feed(Buffer.from([2])), MORE);
    assert.deepEqual([...c.out!], [1, 1, 0x75, 1, 0x70]);
    assert.equal(c.feed(Buffer.from([1, 0])), MORE);
    assert.deepEqual([...c.out!], [...connectRequest('10.0.0.1', 80)!]);
    assert.equal(c.feed(Buffer.from([5, 0, 0, 1, 192, 0, 2, 7, 0, 80, 0x42, 0x43])), DONE);
    assert.equal(c.bound, '192.0.2.7');
    assert.equal(c.head?.toString(), 'BC');

    // Pipelined: one write; the method answer alone leaves a wait for the auth answer, stalled() ends it.
    const p = socks5Client({ host: 'a.b', port: 1 }, creds, 100);
    const first = p.start()!;
    assert.deepEqual([...first.subarray(0, 3)], [5, 1, 2]);
    assert.equal(first.length, 3 + 5 + connectRequest('a.b', 1)!.length);
    assert.equal(p.feed(Buffer.from([5, 2])), MORE);
    assert.ok(p.stallWait() >= 100);
    assert.equal(p.stallWait(), 0, 'the wait is asked for once');
    assert.equal(p.stalled(), FAILED);
    assert.equal(p.error?.code, 'NOT_PIPELINED');
    // The same client again step by step (for a new connection).
    p.stepwise();
    assert.deepEqual([...p.start()!], [5, 2, 0, 2]);
    assert.equal(p.feed(Buffer.from([5, 2])), MORE);
    assert.equal(p.closed(), FAILED);
    assert.equal(p.error?.code, 'CLOSED');

    // A greeting for a connection kept ready is done at the auth answer; a refusal is typed.
    const g = socks5Greet(creds);
    g.start();
    g.feed(Buffer.from([5, 2]));
    assert.equal(g.feed(Buffer.from([1, 0])), DONE);
    const refused = socks5Client({ host: '10.0.0.1', port: 80 }, undefined);
    refused.start();
    refused.feed(Buffer.from([5, 0]));
    assert.equal(refused.feed(Buffer.from([5, 5, 0, 1, 0, 0, 0, 0, 0, 0])), FAILED);
    assert.equal(refused.error?.code, 'REJECTED');
    assert.equal(refused.error?.reply, 5);
    // A target that cannot be encoded: failed from the start, nothing to write.
    const bad = socks5Client({ host: 'x'.repeat(256), port: 1 }, undefined);
    assert.equal(bad.start(), null);
    assert.equal(bad.error?.code, 'BAD_REQUEST');
  });
});
