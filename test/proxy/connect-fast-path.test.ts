// The HTTP listener's CONNECT fast path: a whole, plain CONNECT head in a connection's first bytes is served
// without node's parser (connect-head.ts); every other first chunk goes to node's server byte for byte.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { CONNECT_HEAD_MAX, readConnectHead } from '../../src/proxy/connect-head.ts';
import { HttpListener } from '../../src/proxy/http.ts';
import { HttpsListener } from '../../src/proxy/https-listener.ts';
import { Router } from '../../src/proxy/router.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { sniffAndHandOver } from '../../src/users/handover.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { makeCa } from '../support/tls.ts';
import { poll } from '../support/wait.ts';
import { FixedPool, FixedPools, MapSessions, Users, closeServer, listenPort, node, user } from './fixtures.ts';

const AUTH = `Basic ${Buffer.from('alice:alice-pass').toString('base64')}`;

function head(text: string): Buffer {
  return Buffer.from(text, 'latin1');
}

describe('readConnectHead', () => {
  test('a plain CONNECT head: its target, its credentials trimmed as node trims them, where the tunnel bytes start', () => {
    const text = `CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Authorization: \t ${AUTH} \t\r\n\r\nearly`;
    const h = readConnectHead(head(text));
    assert.deepEqual(h, { target: 'example.com:443', authorization: AUTH, end: text.length - 'early'.length });
    const bare = readConnectHead(head('CONNECT [::1]:8080 HTTP/1.0\r\n\r\n'));
    assert.deepEqual(bare, { target: '[::1]:8080', authorization: undefined, end: 31 });
  });

  test("anything node's server should read is left to it", () => {
    const cases: Record<string, string> = {
      'not CONNECT': 'GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n',
      'lower-case method': 'connect a:1 HTTP/1.1\r\n\r\n',
      'head not whole': 'CONNECT a:1 HTTP/1.1\r\nHost: a:1\r\n',
      'HTTP/1.2': 'CONNECT a:1 HTTP/1.2\r\n\r\n',
      'HTTP/2.0': 'CONNECT a:1 HTTP/2.0\r\n\r\n',
      'two spaces': 'CONNECT  a:1 HTTP/1.1\r\n\r\n',
      'a quote in the target': 'CONNECT a"b:1 HTTP/1.1\r\n\r\n',
      'a path as target': 'CONNECT /x HTTP/1.1\r\n\r\n',
      'no target': 'CONNECT  HTTP/1.1\r\n\r\n',
      'folded header': 'CONNECT a:1 HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n',
      'header without colon': 'CONNECT a:1 HTTP/1.1\r\nX-A b\r\n\r\n',
      'empty header name': 'CONNECT a:1 HTTP/1.1\r\n: b\r\n\r\n',
      'space before colon': 'CONNECT a:1 HTTP/1.1\r\nX-A : b\r\n\r\n',
      'bare LF in a value': 'CONNECT a:1 HTTP/1.1\r\nX-A: b\nc\r\n\r\n',
      'control byte in a value': 'CONNECT a:1 HTTP/1.1\r\nX-A: b\x01c\r\n\r\n',
      'obs-text in a value': 'CONNECT a:1 HTTP/1.1\r\nX-A: caf\xe9\r\n\r\n',
      'two Proxy-Authorization': `CONNECT a:1 HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\nproxy-authorization: x\r\n\r\n`,
      'Content-Length': 'CONNECT a:1 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello',
      'Transfer-Encoding': 'CONNECT a:1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n',
      'more header lines than read here': `CONNECT a:1 HTTP/1.1\r\n${'X: y\r\n'.repeat(65)}\r\n`,
    };
    for (const [what, text] of Object.entries(cases)) assert.equal(readConnectHead(head(text)), undefined, what);
  });

  test("a head longer than node's limit is node's (its parser refuses it); one just within it is read", () => {
    const pad = (n: number): string => `CONNECT a:1 HTTP/1.1\r\nX: ${'y'.repeat(n)}\r\n\r\n`;
    const fixed = pad(0).length;
    assert.ok(readConnectHead(head(pad(CONNECT_HEAD_MAX - fixed))));
    assert.equal(readConnectHead(head(pad(CONNECT_HEAD_MAX - fixed + 1))), undefined);
  });
});

test("every head the fast path reads, node's parser reads to the same target, credentials and early bytes", async () => {
  const fragments = ['Host: x', 'Proxy-Authorization: Basic abc ', 'proxy-AUTHORIZATION:\tz', 'X-A:', 'X-b:  v  ', "!#$%&'*+-.^_`|~:q"];
  fragments.push('Foo: a\tb', 'Connection: close', 'Upgrade: websocket', 'Content-Length: 1', ' folded', 'Caf\xe9: x');
  // A fixed sequence (a linear congruential generator): the same heads every run.
  let seed = 27;
  const next = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const server = createHttpServer();
  let parsed: unknown;
  server.on('connect', (req, socket: Socket, early: Buffer) => {
    parsed = { target: req.url, authorization: req.headers['proxy-authorization'], early: early.length };
    socket.destroy();
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    parsed = { error: err.code };
    socket.destroy();
  });
  const port = await listenPort(server);
  let read = 0;
  for (let n = 0; n < 2000 && read < 200; n++) {
    let text = `CONNECT ${next(2) === 0 ? 'a:1' : '[::1]:80'} HTTP/1.${next(2)}\r\n`;
    for (let k = next(5); k > 0; k--) text += `${fragments[next(fragments.length)]}${next(5) === 0 ? '' : '\r\n'}`;
    text += `\r\n${next(2) === 0 ? 'early' : ''}`;
    const bytes = head(text);
    const mine = readConnectHead(bytes);
    if (mine === undefined) continue;
    read++;
    parsed = undefined;
    const c = connect(port, '127.0.0.1');
    c.on('error', () => undefined);
    c.end(bytes);
    await once(c, 'close');
    const expected = { target: mine.target, authorization: mine.authorization, early: bytes.length - mine.end };
    assert.deepEqual(parsed, expected, JSON.stringify(text));
  }
  assert.ok(read >= 100, `only ${read} heads read`);
  await closeServer(server);
});

describe('the HTTP listener with the CONNECT fast path', () => {
  let target: ReturnType<typeof createServer>;
  let upstream: HttpServer;
  let listener: HttpListener;
  let port = 0;
  let targetPort = 0;
  /** CONNECT requests node's server parsed (the fast path's never reach it). */
  let parsedByNode = 0;
  let lastAccepted: Socket | undefined;

  before(async () => {
    // An echo target behind a real HTTP proxy upstream.
    target = createServer((s) => s.pipe(s));
    targetPort = await listenPort(target);
    upstream = createHttpServer();
    upstream.on('connect', (_req, client: Socket, early: Buffer) => {
      const t = connect(targetPort, '127.0.0.1', () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (early.length > 0) t.write(early);
        client.pipe(t).pipe(client);
      });
      t.on('error', () => client.destroy());
      client.on('error', () => t.destroy());
    });
    const upstreamPort = await listenPort(upstream);
    const metrics = createMetrics({ defaultMetrics: false });
    const router = new Router({
      users: new Users([user('alice', 'alice-pass')]),
      meters: new UnlimitedMeters(),
      pools: new FixedPools(new FixedPool([node('http', upstreamPort)])),
      sessions: new MapSessions(),
      metrics,
      retries: 1,
      connectTimeoutMs: 5000,
      handshakeTimeoutMs: 5000,
      dialDeadlineMs: 10_000,
    });
    // A long handshake deadline: a connection closed in these tests is closed by its own event, not the sweep.
    listener = new HttpListener({ router, port: 0, metrics, handshakeTimeoutMs: 120_000 });
    port = (await listener.listen()).port;
    const server = (listener as unknown as { server: HttpServer }).server;
    server.on('connect', () => parsedByNode++);
    server.on('connection', (s: Socket) => (lastAccepted = s));
  });

  after(async () => {
    await listener.close();
    await closeServer(upstream);
    await closeServer(target);
  });

  /** Writes `parts` one after the other (each once the previous is sent); resolves with the client socket. */
  async function client(parts: Array<string | Buffer>): Promise<Socket> {
    const c = connect(port, '127.0.0.1');
    c.on('error', () => undefined);
    await once(c, 'connect');
    const accepted = await poll(() => lastAccepted?.remotePort === c.localPort && lastAccepted, { what: 'the accept' });
    let sent = 0;
    for (const [i, p] of parts.entries()) {
      await new Promise<void>((resolve) => c.write(p, () => resolve()));
      sent += Buffer.byteLength(p, 'latin1');
      // The next part only once the listener has read the previous ones (so it reads them apart).
      if (i < parts.length - 1)
        await poll(() => accepted.bytesRead >= sent, { what: 'the listener reading the first piece', timeoutMs: 20_000 });
    }
    return c;
  }

  /** Reads from `c` until `text` has arrived (or the socket closes); resolves with all it read, `c` left open. */
  function readUntil(c: Socket, text: string): Promise<string> {
    return new Promise((resolve) => {
      let got = '';
      const done = (): void => {
        c.off('data', onData);
        c.off('close', done);
        c.pause();
        resolve(got);
      };
      const onData = (chunk: Buffer): void => {
        got += chunk.toString('latin1');
        if (got.includes(text)) done();
      };
      c.on('data', onData);
      c.on('close', done);
      c.resume();
    });
  }

  test('a whole CONNECT head with bytes after it: tunneled without node parsing it, the early bytes delivered', async () => {
    const before = parsedByNode;
    const c = await client([`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\nearly-bytes`]);
    const got = await readUntil(c, 'early-bytes');
    assert.match(got, /^HTTP\/1\.1 200 /);
    assert.ok(got.endsWith('early-bytes'), got);
    c.write('more');
    assert.equal(await readUntil(c, 'more'), 'more');
    c.destroy();
    assert.equal(parsedByNode, before, 'node parsed a CONNECT the fast path takes');
  });

  test("a CONNECT head in two pieces is node's to read, and tunneled the same", async () => {
    const before = parsedByNode;
    const c = await client([`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\n`, `Proxy-Authorization: ${AUTH}\r\n\r\nearly`]);
    const got = await readUntil(c, 'early');
    assert.match(got, /^HTTP\/1\.1 200 /);
    assert.ok(got.endsWith('early'), got);
    c.destroy();
    assert.equal(parsedByNode, before + 1);
  });

  test("wrong credentials on the fast path: 407 with the challenge, as on node's", async () => {
    const bad = `Basic ${Buffer.from('alice:wrong').toString('base64')}`;
    const c = await client([`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nProxy-Authorization: ${bad}\r\n\r\n`]);
    const got = await readUntil(c, '\r\n\r\n');
    assert.match(got, /^HTTP\/1\.1 407 /);
    assert.match(got, /Proxy-Authenticate: Basic realm="rotor"/i);
    c.destroy();
  });

  test("what node's parser refuses is refused as before (400, malformed request): an oversized head, a lower-case method", async () => {
    const big = await client([`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nX: ${'y'.repeat(CONNECT_HEAD_MAX)}\r\n\r\n`]);
    assert.match(await readUntil(big, '\r\n\r\n'), /^HTTP\/1\.1 400 /);
    big.destroy();
    const lower = await client([`connect 127.0.0.1:${targetPort} HTTP/1.1\r\n\r\n`]);
    assert.match(await readUntil(lower, '\r\n\r\n'), /^HTTP\/1\.1 400 /);
    lower.destroy();
  });

  test('a plain-HTTP first request is put back whole for node: answered (407 without credentials), the connection kept', async () => {
    const c = await client(['GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n']);
    assert.match(await readUntil(c, '\r\n\r\n'), /^HTTP\/1\.1 407 /);
    c.write('GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    assert.match(await readUntil(c, '\r\n\r\n'), /^HTTP\/1\.1 407 /);
    c.destroy();
  });

  test("a socket handed over by a user's own port (its first chunk put back): a whole CONNECT head is the fast path's, a split one node's", async () => {
    // The user port's sniffer, as ports.ts runs it, in front of this listener.
    let handed: Socket | undefined;
    const port = createServer((s) => {
      handed = s;
      s.on('error', () => undefined);
      sniffAndHandOver(s, { http: listener, socks5: { handleSocket: (x) => x.destroy() } }, 60_000);
    });
    const portNo = await listenPort(port);
    try {
      const before = parsedByNode;
      const whole = connect(portNo, '127.0.0.1');
      whole.on('error', () => undefined);
      whole.write(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\nearly-bytes`);
      const got = await readUntil(whole, 'early-bytes');
      assert.match(got, /^HTTP\/1\.1 200 /);
      assert.ok(got.endsWith('early-bytes'), got);
      whole.destroy();
      assert.equal(parsedByNode, before, 'node parsed a CONNECT handed over whole');
      // A head in two pieces: the first chunk is not a whole head, so node reads it, put back byte for byte.
      const split = connect(portNo, '127.0.0.1');
      split.on('error', () => undefined);
      const first = `CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\n`;
      await new Promise<void>((resolve) => split.write(first, () => resolve()));
      await poll(() => handed?.remotePort === split.localPort && handed!.bytesRead >= first.length, {
        what: 'the first piece read',
        timeoutMs: 20_000,
      });
      split.write(`Proxy-Authorization: ${AUTH}\r\n\r\nearly`);
      const got2 = await readUntil(split, 'early');
      assert.match(got2, /^HTTP\/1\.1 200 /);
      assert.ok(got2.endsWith('early'), got2);
      split.destroy();
      assert.equal(parsedByNode, before + 1, "a split head handed over is node's to read");
    } finally {
      await closeServer(port);
    }
  });

  test('a socket handed over by the HTTPS listener once TLS is up: a whole CONNECT head is tunneled without node parsing it', async () => {
    const ca = await makeCa('Fast path CA');
    try {
      const leaf = await ca.leaf('proxy');
      const https = await HttpsListener.create({ http: listener, port: 0, cert: leaf.certFile, key: leaf.keyFile });
      const { port: httpsPort } = await https.listen();
      try {
        const before = parsedByNode;
        const c = tlsConnect({ host: '127.0.0.1', port: httpsPort, ca: readFileSync(ca.certFile), servername: 'localhost' });
        c.on('error', () => undefined);
        await once(c, 'secureConnect');
        c.write(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\nover-tls`);
        const got = await readUntil(c, 'over-tls');
        assert.match(got, /^HTTP\/1\.1 200 /);
        assert.ok(got.endsWith('over-tls'), got);
        c.destroy();
        assert.equal(parsedByNode, before, 'node parsed a CONNECT the fast path takes over TLS');
      } finally {
        await https.close();
      }
    } finally {
      ca.cleanup();
    }
  });

  test('a client that ends before sending a byte is closed at once, not at the handshake deadline', { timeout: 20_000 }, async () => {
    const c = connect(port, '127.0.0.1');
    c.on('error', () => undefined);
    await once(c, 'connect');
    const closed = once(c, 'close');
    c.end();
    await closed;
    assert.equal(c.destroyed, true);
  });
});

test('closing the listener closes a connection that has sent nothing yet at once, not after the drain', { timeout: 20_000 }, async () => {
  const metrics = createMetrics({ defaultMetrics: false });
  const router = new Router({
    users: new Users([user('alice', 'alice-pass')]),
    meters: new UnlimitedMeters(),
    pools: new FixedPools(new FixedPool([])),
    sessions: new MapSessions(),
    metrics,
    retries: 1,
    connectTimeoutMs: 1000,
    handshakeTimeoutMs: 1000,
    dialDeadlineMs: 2000,
  });
  const listener = new HttpListener({ router, port: 0, metrics, handshakeTimeoutMs: 120_000 });
  const { port } = await listener.listen();
  const silent = connect(port, '127.0.0.1');
  silent.on('error', () => undefined);
  await once(silent, 'connect');
  await poll(() => listener.connections === 1, { what: 'the accept' });
  const closed = once(silent, 'close');
  // A drain of a minute: only a connection left open would make close() wait for it. The drain's own timers are
  // unref'd (a daemon has other work keeping it alive): this one keeps the test's loop alive meanwhile.
  const alive = setInterval(() => undefined, 1000);
  await listener.close(60_000);
  clearInterval(alive);
  await closed;
});
