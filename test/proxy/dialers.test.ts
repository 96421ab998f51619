import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { DialCancel } from '../../src/proxy/cancel.ts';
import { dialHttpConnect, dialSocks5 } from '../../src/proxy/upstream-dial.ts';
import { DialAbortedError, UpstreamDialError } from '../../src/proxy/errors.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { poll } from '../support/wait.ts';
import {
  closeServer,
  deadPort,
  listenPort,
  node,
  startMicrosocks,
  startSilent,
  startTinyproxy,
  startTarget,
  type Child,
} from './fixtures.ts';

/** Sends a GET over an established tunnel and reads until the peer closes. */
function getOver(socket: Socket, port: number, path: string, head: Buffer | null): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = head ? [head] : [];
    socket.on('data', (c: Buffer) => parts.push(c));
    socket.once('end', () => resolve(Buffer.concat(parts).toString()));
    socket.once('error', reject);
    socket.resume();
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
  });
}

const opts = { connectTimeoutMs: 2000, handshakeTimeoutMs: 2000 };

describe('upstream dialers against real proxies', () => {
  let target: Awaited<ReturnType<typeof startTarget>>;
  let socks: Child;
  let tiny: Child;
  before(async () => {
    target = await startTarget();
    socks = await startMicrosocks('up', 'uppass');
    tiny = await startTinyproxy('up', 'uppass');
  });
  after(async () => {
    await socks.stop();
    await tiny.stop();
    await target.close();
  });

  test('SOCKS5 via microsocks with user/password reaches the target; metric observed', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const t = await dialSocks5(node('socks5', socks.port, 'up', 'uppass'), { host: '127.0.0.1', port: target.port }, { ...opts, metrics });
    const text = await getOver(t.socket, target.port, '/hello', t.head);
    assert.match(text, /^HTTP\/1\.1 200/);
    assert.match(text, /hello from target$/);
    const m = await metrics.upstreamConnectSeconds.get();
    assert.equal(m.values.find((v) => v.metricName === 'rotor_upstream_connect_seconds_count' && v.labels.kind === 'socks5')?.value, 1);
  });

  test('SOCKS5 with a domain target (resolved by the upstream)', async () => {
    const t = await dialSocks5(node('socks5', socks.port, 'up', 'uppass'), { host: 'localhost', port: target.port }, opts);
    const text = await getOver(t.socket, target.port, '/hello', t.head);
    assert.match(text, /hello from target$/);
  });

  test('SOCKS5 wrong credentials -> auth failure', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    await assert.rejects(
      dialSocks5(node('socks5', socks.port, 'up', 'nope'), { host: '127.0.0.1', port: target.port }, { ...opts, metrics }),
      (e: unknown) => e instanceof UpstreamDialError && e.reason === 'auth',
    );
    const f = await metrics.upstreamFailures.get();
    assert.equal(f.values.find((v) => v.labels.reason === 'auth')?.value, 1);
  });

  test('SOCKS5 target refused by the upstream -> target_refused', async () => {
    const closed = await deadPort();
    await assert.rejects(
      dialSocks5(node('socks5', socks.port, 'up', 'uppass'), { host: '127.0.0.1', port: closed }, opts),
      (e: unknown) => e instanceof UpstreamDialError && e.reason === 'target_refused' && !e.timedOut,
    );
  });

  test('SOCKS5 node not listening -> refused', async () => {
    const closed = await deadPort();
    await assert.rejects(
      dialSocks5(node('socks5', closed), { host: '127.0.0.1', port: target.port }, opts),
      (e: unknown) => e instanceof UpstreamDialError && e.reason === 'refused',
    );
  });

  test('HTTP CONNECT via tinyproxy with Basic auth reaches the target', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const t = await dialHttpConnect(
      node('http', tiny.port, 'up', 'uppass'),
      { host: '127.0.0.1', port: target.port },
      { ...opts, metrics },
    );
    const text = await getOver(t.socket, target.port, '/hello', t.head);
    assert.match(text, /hello from target$/);
    const m = await metrics.upstreamConnectSeconds.get();
    assert.equal(m.values.find((v) => v.metricName === 'rotor_upstream_connect_seconds_count' && v.labels.kind === 'http')?.value, 1);
  });

  test('HTTP CONNECT wrong credentials -> 407 -> auth', async () => {
    await assert.rejects(
      dialHttpConnect(node('http', tiny.port, 'up', 'bad'), { host: '127.0.0.1', port: target.port }, opts),
      (e: unknown) => e instanceof UpstreamDialError && e.reason === 'auth',
    );
  });

  test('HTTP CONNECT: bytes behind the 200 header are kept as head', async () => {
    // A tiny CONNECT server that sends the target's first bytes in the same write as its answer.
    const server = createServer((s) => {
      s.once('data', () => s.end('HTTP/1.1 200 Connection established\r\nX-A: b\r\n\r\nBANNER'));
    });
    const port = await listenPort(server);
    try {
      const t = await dialHttpConnect(node('http', port), { host: 'example.test', port: 25 }, opts);
      assert.equal(t.head?.toString(), 'BANNER');
      t.socket.destroy();
    } finally {
      await closeServer(server);
    }
  });

  test('HTTP CONNECT: a non-HTTP answer and a 502 are typed failures', async () => {
    const answers = ['SSH-2.0-hello\r\n\r\n', 'HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n'];
    for (const [i, answer] of answers.entries()) {
      const server = createServer((s) => s.once('data', () => s.end(answer)));
      const port = await listenPort(server);
      try {
        await assert.rejects(
          dialHttpConnect(node('http', port), { host: '127.0.0.1', port: 1 }, opts),
          (e: unknown) => e instanceof UpstreamDialError && e.reason === (i === 0 ? 'handshake' : 'target_refused'),
        );
      } finally {
        await closeServer(server);
      }
    }
  });

  test('a silent upstream fails within the handshake timeout (both kinds)', async () => {
    const silent = await startSilent();
    try {
      for (const kind of ['socks5', 'http'] as const) {
        const started = Date.now();
        const dial = kind === 'socks5' ? dialSocks5 : dialHttpConnect;
        await assert.rejects(
          dial(node(kind, silent.port), { host: '127.0.0.1', port: target.port }, { connectTimeoutMs: 1000, handshakeTimeoutMs: 300 }),
          (e: unknown) => e instanceof UpstreamDialError && e.reason === 'connect_timeout' && e.timedOut,
        );
        const took = Date.now() - started;
        assert.ok(took >= 250 && took < 1500, `${kind} took ${took} ms`);
      }
    } finally {
      await silent.close();
    }
  });

  test('a handshake longer than the connect timeout gets its whole own timeout (one timer serves both deadlines)', async () => {
    const silent = await startSilent();
    try {
      for (const kind of ['socks5', 'http'] as const) {
        const started = performance.now();
        const dial = kind === 'socks5' ? dialSocks5 : dialHttpConnect;
        await assert.rejects(
          dial(node(kind, silent.port), { host: '127.0.0.1', port: target.port }, { connectTimeoutMs: 150, handshakeTimeoutMs: 450 }),
          (e: unknown) =>
            e instanceof UpstreamDialError &&
            e.reason === 'connect_timeout' &&
            e.message.includes(kind === 'socks5' ? 'complete the SOCKS5 handshake within 450 ms' : 'answer CONNECT within 450 ms'),
        );
        const took = performance.now() - started;
        // Not at the connect timer's 150 ms: the handshake's 450 ms from the connect.
        assert.ok(took >= 440 && took < 1500, `${kind} took ${took} ms`);
      }
    } finally {
      await silent.close();
    }
  });

  test('an abort while the upstream is silent ends the dial at once (AbortSignal and DialCancel)', async () => {
    const silent = await startSilent();
    try {
      for (const kind of ['socks5', 'http'] as const) {
        for (const flavour of ['AbortController', 'DialCancel'] as const) {
          const dial = kind === 'socks5' ? dialSocks5 : dialHttpConnect;
          const ac = new AbortController();
          const cancel = new DialCancel();
          const signal = flavour === 'AbortController' ? ac.signal : cancel;
          const started = Date.now();
          setTimeout(() => (flavour === 'AbortController' ? ac.abort() : cancel.abort()), 50);
          await assert.rejects(
            dial(
              node(kind, silent.port),
              { host: '127.0.0.1', port: target.port },
              { connectTimeoutMs: 5000, handshakeTimeoutMs: 5000, signal },
            ),
            (e: unknown) => e instanceof DialAbortedError,
          );
          assert.ok(Date.now() - started < 1000, `${kind} ${flavour}`);
        }
      }
    } finally {
      await silent.close();
    }
  });
  test("a DialCancel's abort runs no code of the dial: it destroys the dial's socket, and the dial ends on the close", async () => {
    const silent = await startSilent();
    /** Records what a dial registers on it: nothing, the socket is handed over instead. */
    class Watched extends DialCancel {
      registered = 0;
      override addEventListener(type: 'abort', listener: Parameters<DialCancel['addEventListener']>[1]): void {
        this.registered++;
        super.addEventListener(type, listener);
      }
    }
    try {
      for (const kind of ['socks5', 'http'] as const) {
        const dial = kind === 'socks5' ? dialSocks5 : dialHttpConnect;
        const cancel = new Watched();
        const dialing = dial(
          node(kind, silent.port),
          { host: '127.0.0.1', port: target.port },
          { connectTimeoutMs: 5000, handshakeTimeoutMs: 5000, signal: cancel },
        );
        // Connected and waiting for the silent upstream's answer: the cancel holds the dial's socket.
        await poll(() => cancel.socket !== null && !(cancel.socket as Socket).connecting);
        const socket = cancel.socket as Socket;
        cancel.abort();
        assert.equal(socket.destroyed, true, `${kind}: abort() destroyed the socket itself`);
        await assert.rejects(dialing, (e: unknown) => e instanceof DialAbortedError);
        assert.equal(cancel.registered, 0, `${kind}: the dial registered no abort listener`);
        assert.equal(cancel.socket, null);
      }
    } finally {
      await silent.close();
    }
  });
});
