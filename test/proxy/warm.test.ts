// Warm upstream connections (src/proxy/warm.ts) against a real SOCKS5 upstream on loopback (Rotor's own
// server-side handshake, src/wire/socks5.ts) that records which credentials each request came on, and an HTTP
// CONNECT upstream: handed out only to dials with the same credentials, never when the upstream closed them
// while idle (the tunnel still succeeds), and drained to zero once tunnels stop.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { acceptSocks5, writeReply, REPLY } from '../../src/wire/socks5.ts';
import { WarmConnections, type WarmOptions } from '../../src/proxy/warm.ts';
import type { Tunnel } from '../../src/proxy/dial-http.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { DialCancel } from '../../src/proxy/cancel.ts';
import { DialAbortedError } from '../../src/proxy/errors.ts';
import { poll } from '../support/wait.ts';

interface Upstream {
  port: number;
  /** connections accepted */
  accepted: number;
  /** user name each CONNECT arrived on, in order */
  requests: string[];
  /** close every connection that sits authenticated and idle this long (0: never) */
  closeIdleAfterMs: number;
  server: Server;
  /** server-side sockets still open */
  open: Set<Socket>;
  /** while a list: each connection accepted waits here, unanswered, until called (true: served, false: its auth refused) */
  held: Array<(ok: boolean) => void> | null;
}

/** SOCKS5 with user/password; a CONNECT is answered 'succeeded' and then the tunnel says `user:<name>` and ends. */
async function socksUpstream(): Promise<Upstream> {
  const up: Upstream = {
    port: 0,
    accepted: 0,
    requests: [],
    closeIdleAfterMs: 0,
    server: undefined as unknown as Server,
    open: new Set(),
    held: null,
  };
  up.server = createServer((socket: Socket) => {
    up.accepted++;
    up.open.add(socket);
    socket.once('close', () => up.open.delete(socket));
    socket.on('error', () => undefined);
    let idle: NodeJS.Timeout | undefined;
    const serve = (refuse: boolean) =>
      acceptSocks5<string>(socket, {
        timeoutMs: 60_000,
        auth: 'password',
        authenticate: (username, password) => {
          if (refuse || password !== `${username}-pass`) return { ok: false };
          if (up.closeIdleAfterMs > 0) idle = setTimeout(() => socket.destroy(), up.closeIdleAfterMs);
          return { ok: true, context: username };
        },
      }).then(
        (req) => {
          clearTimeout(idle);
          up.requests.push(req.username);
          writeReply(socket, REPLY.succeeded, { host: '127.0.0.1', port: 1 });
          socket.end(`user:${req.username}`);
        },
        () => socket.destroy(),
      );
    // Held: connected, its greeting unanswered (the client waits for the method answer, no stall timer runs).
    if (up.held !== null) up.held.push((ok) => void serve(!ok));
    else void serve(false);
  });
  await new Promise<void>((r) => up.server.listen(0, '127.0.0.1', r));
  up.port = (up.server.address() as AddressInfo).port;
  return up;
}

const node = (port: number, username: string): UpstreamNode => ({
  id: `socks5://${username}@127.0.0.1:${port}`,
  protocol: 'socks5',
  host: '127.0.0.1',
  port,
  username,
  password: `${username}-pass`,
  source: 'pwd',
});
const target = { host: '127.0.0.1', port: 9 };
const dialOptions = { connectTimeoutMs: 5000, handshakeTimeoutMs: 5000 };

/** Dials through `warm` and reads the tunnel to its end. */
async function tunnel(warm: WarmConnections, n: UpstreamNode): Promise<string> {
  const t = await warm.socks5(n, target, dialOptions);
  let text = t.head ? t.head.toString() : '';
  t.socket.resume();
  return new Promise((resolve, reject) => {
    t.socket.on('data', (b: Buffer) => (text += b.toString()));
    t.socket.once('end', () => {
      t.socket.destroy();
      resolve(text);
    });
    t.socket.once('error', reject);
  });
}

function make(extra: Partial<WarmOptions> = {}) {
  const metrics = createMetrics();
  const warm = new WarmConnections({
    perNode: 3,
    maxPerPool: 8,
    idleMs: 60_000,
    connectTimeoutMs: 5000,
    handshakeTimeoutMs: 5000,
    metrics,
    ...extra,
  });
  const outcome = async (o: string) => (await metrics.upstreamWarmTotal.get()).values.find((v) => v.labels.outcome === o)?.value ?? 0;
  return { warm, metrics, outcome };
}

/** Openings under way over all of `warm`'s sets (private: read by tests that need the sets quiet). */
function openingOf(warm: WarmConnections): number {
  let n = 0;
  for (const set of (warm as unknown as { sets: Map<string, { opening: number }> }).sets.values()) n += set.opening;
  return n;
}

const until = (what: string, ok: () => boolean) => poll(() => ok(), { what, timeoutMs: 10_000, everyMs: 10 });

describe('warm demand', () => {
  // Pure arithmetic of the set's dial ring (private: no socket needed to see what it asks for).
  type Demand = { demand(set: { recent: number[]; openMs: number; at: number }, now: number): number };
  // `recent` in time order from index 0 (a full ring's next write at 0).
  const demandOf = (warm: WarmConnections, recent: number[], openMs: number, now: number): number =>
    (warm as unknown as Demand).demand({ recent, openMs, at: 0 }, now);

  test('hundreds of tunnels a second ask for more than two connections (the ring of 64 dials is the rate, not the 10 s window)', () => {
    const { warm } = make({ perNode: 8 });
    const now = 100_000;
    // 64 dials in the last 100 ms: 640 a second, each connection opening in 10 ms → 1 + 640/s × 10 ms = 8 wanted.
    const burst = Array.from({ length: 64 }, (_, i) => now - 100 + (i * 100) / 64);
    assert.equal(demandOf(warm, burst, 10, now), 8);
    // A few dials in the window: their count over the window (3 in 10 s, 10 ms to open: 1 + ceil(0.003) = 2).
    assert.equal(demandOf(warm, [now - 9000, now - 5000, now - 1], 10, now), 2);
    // None in the window: nothing wanted.
    assert.equal(demandOf(warm, [now - 20_000], 10, now), 0);
    warm.close();
  });

  test('tunnels arriving in bursts ask for as many as came within one opening time, not the mean rate', () => {
    const { warm } = make({ perNode: 32 });
    const now = 100_000;
    // 64 dials in 100 ms as 4 bursts of 16 (a loop turn accepting many clients at once), 25 ms apart, each
    // opening 10 ms: the mean rate says 1 + 640/s × 10 ms = 8, but 16 come within one opening time, and the 9th
    // of a burst would find the set dry: 1 + 16 wanted.
    const bursts = Array.from({ length: 64 }, (_, i) => now - 100 + Math.floor(i / 16) * 25 + (i % 16) * 0.01);
    assert.equal(demandOf(warm, bursts, 10, now), 17);
    // A ring written past its end: the oldest entry is at `at`, the peak is found across the wrap.
    const ring = [...bursts.slice(40), ...bursts.slice(0, 40)];
    assert.equal((warm as unknown as Demand).demand({ recent: ring, openMs: 10, at: 24 }, now), 17);
    // Still at most perNode.
    const small = make({ perNode: 8 });
    assert.equal(demandOf(small.warm, bursts, 10, now), 8);
    small.warm.close();
    warm.close();
  });

  test('a wrapped ring whose oldest dials left the window: those are passed over across the wrap, the burst counts', () => {
    const { warm } = make({ perNode: 32 });
    const now = 100_000;
    // In time order: 20 dials 30 s ago (out of the 10 s window), 32 over the last 8 s, then 12 within 5 ms.
    const inOrder = [
      ...Array.from({ length: 20 }, (_, i) => now - 30_000 + i),
      ...Array.from({ length: 32 }, (_, i) => now - 8000 + i * 150),
      ...Array.from({ length: 12 }, (_, i) => now - 50 + i * 0.4),
    ];
    // Written past its end: the oldest at index 50, so the old ones wrap from 63 to 0.
    const at = 50;
    const ring = Array.from({ length: 64 }, (_, i) => inOrder[(i - at + 64) % 64]!);
    // 44 in the window (the rate over the window: 1 + ceil(44 / 10 s × 10 ms) = 2), 12 of them within one opening time.
    assert.equal((warm as unknown as Demand).demand({ recent: ring, openMs: 10, at }, now), 13);
    // Later, with the burst itself out of the window too: nothing wanted.
    assert.equal((warm as unknown as Demand).demand({ recent: ring, openMs: 10, at }, now + 10_000), 0);
    warm.close();
  });
});

describe('warm upstream connections', () => {
  let up: Upstream;
  before(async () => {
    up = await socksUpstream();
  });
  after(async () => {
    // Every warm connection was closed with its set: the upstream sees none left open.
    await until('the upstream sees no connection left', () => up.open.size === 0).catch((err: unknown) => {
      for (const s of up.open) s.destroy();
      throw err;
    });
    up.server.close();
  });

  test('a warm connection is used by the next tunnel: greeted and authenticated ahead, only CONNECT left', async () => {
    const { warm, outcome } = make();
    const a = node(up.port, 'alice');
    assert.equal(await tunnel(warm, a), 'user:alice');
    await until('a warm connection', () => warm.size > 0);
    const accepted = up.accepted;
    assert.equal(await tunnel(warm, a), 'user:alice');
    assert.equal(await outcome('used'), 1);
    // The tunnel took a connection opened before it (refills may have opened others since).
    assert.ok(up.requests.length === 2 && up.accepted >= accepted);
    warm.close();
    assert.equal(warm.size, 0);
  });

  test("a taker that reads in the answer's turn gets the warm socket flowing (no pause and resume), and every byte", async () => {
    const { warm, outcome } = make();
    const a = node(up.port, 'erin');
    assert.equal(await tunnel(warm, a), 'user:erin');
    await until('a warm connection', () => warm.size > 0);
    const used = await outcome('used');
    // As a listener's relay does: the reader is attached in a microtask of the answer's turn.
    const got = await new Promise<{ paused: boolean; text: string }>((resolve, reject) => {
      const answer = {
        takesFlowing: true,
        answered: (t: Tunnel) => {
          const paused = t.socket.isPaused();
          let text = t.head ? t.head.toString() : '';
          queueMicrotask(() => {
            t.socket.on('data', (b: Buffer) => (text += b.toString()));
            t.socket.once('end', () => {
              t.socket.destroy();
              resolve({ paused, text });
            });
          });
        },
        failed: reject,
      };
      assert.equal(warm.socks5(a, target, { ...dialOptions, answer }), null);
    });
    assert.equal(await outcome('used'), used + 1, 'the tunnel went over a warm connection');
    assert.deepEqual(got, { paused: false, text: 'user:erin' });
    warm.close();
  });

  test('credentials never cross: users and sessions on the same upstream each get only their own connections', async () => {
    const { warm } = make();
    up.requests.length = 0;
    const nodes = [node(up.port, 'alice'), node(up.port, 'bob'), node(up.port, 'alice.session.s1'), node(up.port, 'alice.session.s2')];
    for (let round = 0; round < 6; round++) {
      const answers = await Promise.all(nodes.map((n) => tunnel(warm, n)));
      assert.deepEqual(
        answers,
        nodes.map((n) => `user:${n.username}`),
      );
      await until('warm connections for every credential', () => warm.size >= 1);
    }
    // Same user name, another password (a rotated credential): never served by the old one's connections.
    const rotated: UpstreamNode = { ...nodes[0]!, password: 'other' };
    await assert.rejects(warm.socks5(rotated, target, dialOptions), (err: Error & { reason?: string }) => err.reason === 'auth');
    warm.close();
  });

  test('a warm connection the upstream closed while idle is never handed out; the tunnel still succeeds', async () => {
    // A short demand window: the closed connections are replaced for 300 ms, then the set stays empty. (With the
    // default 10 s, "none ready" was only the instant between a close and its replacement, which a loaded
    // machine's poll could miss for the whole wait.)
    const { warm, outcome } = make({ windowMs: 300 });
    const a = node(up.port, 'carol');
    up.closeIdleAfterMs = 50;
    try {
      assert.equal(await tunnel(warm, a), 'user:carol');
      await until('a warm connection', () => warm.size > 0);
      // The upstream closes it after 50 ms idle: the set notices and lets it go.
      // Nothing opening either: a replacement under way would be waited for and used (counted 'used'), and this
      // asks about the closed ones only. With none ready and none opening, nothing starts one until a dial.
      await until('the closed ones gone, nothing opening', () => warm.size === 0 && openingOf(warm) === 0);
      const expired = await outcome('expired');
      assert.ok(expired >= 1, `expired ${expired}`);
      up.closeIdleAfterMs = 0;
      const used = await outcome('used');
      assert.equal(await tunnel(warm, a), 'user:carol');
      assert.equal(await outcome('used'), used, 'no closed connection was used');
    } finally {
      up.closeIdleAfterMs = 0;
      warm.close();
    }
  });

  test('the warm set shrinks to zero when tunnels stop', async () => {
    const { warm, metrics } = make({ idleMs: 100, windowMs: 300 });
    const a = node(up.port, 'dave');
    for (let i = 0; i < 5; i++) assert.equal(await tunnel(warm, a), 'user:dave');
    await until('a warm connection', () => warm.size > 0);
    await until('none left', () => warm.size === 0);
    assert.equal((await metrics.upstreamWarmConnections.get()).values[0]?.value, 0);
    warm.close();
  });

  test('ready connections are retired by idleMs under one sweep timer, not a timer each', async () => {
    // Timers warm.ts makes while a tunnel takes a connection and the set refills (async_hooks sees every
    // Timeout created; the test's own polls and upstream are not counted).
    let timers = 0;
    const hook = createHook({
      init(_id, type) {
        if ((type === 'Timeout' || type === 'Immediate') && /src[\\/]proxy[\\/]warm\.ts/.test(new Error().stack ?? '')) timers++;
      },
    });
    const idleMs = 400;
    const { warm } = make({ perNode: 4, idleMs, windowMs: 60_000 });
    const n = node(up.port, 'frank');
    for (let i = 0; i < 8; i++) assert.equal(await tunnel(warm, n), 'user:frank');
    // Each warm connection's own open timeout stays (one per connection opened); ready ones add one timer in all.
    await until('ready connections', () => warm.size >= 2);
    const opened = up.accepted;
    hook.enable();
    const acceptedBefore = up.accepted;
    await tunnel(warm, n);
    await until('the set refilled', () => warm.size >= 2 && up.accepted > acceptedBefore);
    const readyAt = performance.now();
    hook.disable();
    const made = up.accepted - acceptedBefore;
    // The tunnel's request deadline and each opening's deadline are checked by the running sweep, and the refill
    // runs in the dial's turn: no timer and no immediate at all.
    assert.equal(timers, 0, `${timers} timers and immediates for a tunnel and ${made} connection(s) opened and made ready`);
    // Retired by idleMs (never later), then replaced while demand lasts: every connection ready now is gone
    // from the upstream's side within idleMs plus the close's own delay.
    const first = new Set(up.open);
    await until('the ready connections retired', () => [...first].every((s) => s.destroyed || !up.open.has(s)));
    const took = performance.now() - readyAt;
    assert.ok(took <= idleMs + 1000, `retired after ${took.toFixed(0)} ms (idleMs ${idleMs})`);
    assert.ok(up.accepted > opened);
    warm.close();
  });

  test('an opening that never gets its greeting answered fails at its deadline, not before', async () => {
    // Accepts TCP and says nothing: the fresh dial fails by its own deadline, the warm opening by the sweep's.
    // (5 ms of slack: node's timers run by the loop's cached clock, which may lag performance.now.)
    const silent = createServer((s) => s.on('error', () => undefined));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as AddressInfo).port;
    const connectTimeoutMs = 150;
    const handshakeTimeoutMs = 150;
    const { warm, outcome } = make({ connectTimeoutMs, handshakeTimeoutMs });
    const started = performance.now();
    await assert.rejects(warm.socks5(node(port, 'gina'), target, { connectTimeoutMs, handshakeTimeoutMs }));
    await poll(async () => (await outcome('failed')) >= 1, { what: 'the opening failed', timeoutMs: 20_000, everyMs: 10 });
    const took = performance.now() - started;
    assert.ok(took >= connectTimeoutMs + handshakeTimeoutMs - 5, `failed after ${took.toFixed(0)} ms`);
    assert.equal(warm.size, 0);
    warm.close();
    silent.close();
  });

  test('a tunnel request on a warm connection the upstream never answers fails at the handshake deadline', async () => {
    // Greets and authenticates, then never answers the CONNECT.
    const open = new Set<Socket>();
    const mute = createServer((socket) => {
      open.add(socket);
      socket.once('close', () => open.delete(socket));
      socket.on('error', () => undefined);
      acceptSocks5<string>(socket, {
        timeoutMs: 60_000,
        auth: 'password',
        authenticate: (username) => ({ ok: true, context: username }),
      }).catch(() => socket.destroy());
    });
    await new Promise<void>((r) => mute.listen(0, '127.0.0.1', r));
    const port = (mute.address() as AddressInfo).port;
    const handshakeTimeoutMs = 200;
    const { warm, outcome } = make({ handshakeTimeoutMs, connectTimeoutMs: 5000 });
    const n = node(port, 'hank');
    const options = { connectTimeoutMs: 5000, handshakeTimeoutMs };
    await assert.rejects(warm.socks5(n, target, options));
    await until('a warm connection', () => warm.size > 0);
    const started = performance.now();
    await assert.rejects(warm.socks5(n, target, options), (err: Error & { reason?: string }) => err.reason === 'connect_timeout');
    const took = performance.now() - started;
    assert.ok(took >= handshakeTimeoutMs - 5, `failed after ${took.toFixed(0)} ms`);
    assert.ok((await outcome('failed')) >= 1);
    warm.close();
    for (const s of open) s.destroy();
    mute.close();
  });

  /**
   * Uses up the ready connections of `n` with the upstream holding every connection after them: the refills
   * they start stay under way (connected, greeting unanswered). Then `body`; at its end (or failure) whatever is
   * still held is served and the set closed.
   */
  async function withOpeningsHeld(
    extra: Partial<WarmOptions>,
    n: UpstreamNode,
    body: (w: ReturnType<typeof make>, held: Array<(ok: boolean) => void>) => Promise<void>,
  ): Promise<void> {
    const w = make(extra);
    const held: Array<(ok: boolean) => void> = [];
    try {
      assert.equal(await tunnel(w.warm, n), `user:${n.username}`);
      await until('ready connections', () => w.warm.size >= 2);
      up.held = held;
      while (w.warm.size > 0) assert.equal(await tunnel(w.warm, n), `user:${n.username}`);
      await until('openings under way, held', () => held.length >= 1);
      await body(w, held);
    } finally {
      release(held, true);
      w.warm.close();
    }
  }

  const release = (held: Array<(ok: boolean) => void>, ok: boolean): void => {
    up.held = null;
    for (const r of held.splice(0)) r(ok);
  };

  test('a tunnel that finds nothing ready takes an opening under way instead of dialing afresh', async () => {
    const n = node(up.port, 'ivan');
    await withOpeningsHeld({ perNode: 3 }, n, async ({ warm, outcome }, held) => {
      assert.equal(warm.size, 0);
      const used = await outcome('used');
      const pending = tunnel(warm, n);
      // Another user's tunnel never waits on ivan's openings: its own fresh dial, its own credentials.
      const other = tunnel(warm, node(up.port, 'judy'));
      release(held, true);
      assert.equal(await pending, 'user:ivan');
      assert.equal(await other, 'user:judy');
      assert.equal(await outcome('used'), used + 1, 'the tunnel went over the opening it waited for');
    });
  });

  test('a tunnel waiting for an opening that fails dials afresh and succeeds', async () => {
    const n = node(up.port, 'kate');
    await withOpeningsHeld({ perNode: 3 }, n, async ({ warm, outcome }, held) => {
      const failed = await outcome('failed');
      const pending = tunnel(warm, n);
      // Every opening under way is refused: the waiting tunnel's own dial (after them) is not held.
      release(held, false);
      assert.equal(await pending, 'user:kate');
      assert.ok((await outcome('failed')) > failed);
    });
  });

  test('a tunnel cancelled while waiting for an opening leaves it to the set; one never served fails at its deadline', async () => {
    const n = node(up.port, 'liam');
    await withOpeningsHeld({ perNode: 3 }, n, async ({ warm }, held) => {
      const cancel = new DialCancel();
      const cancelled = warm.socks5(n, target, { ...dialOptions, signal: cancel });
      cancel.abort();
      await assert.rejects(cancelled, DialAbortedError);
      const started = performance.now();
      await assert.rejects(
        warm.socks5(n, target, { connectTimeoutMs: 100, handshakeTimeoutMs: 100 }),
        (err: Error & { reason?: string }) => err.reason === 'connect_timeout',
      );
      // Waited as long as a fresh dial may take (connect and handshake), not less.
      const took = performance.now() - started;
      assert.ok(took >= 195, `failed after ${took.toFixed(0)} ms`);
      // The openings nobody waits for any more become ready connections.
      release(held, true);
      await until('the openings ready', () => warm.size >= 1);
    });
  });

  test('a tunnel waiting on stalled openings dials fresh after a few opening times and succeeds', async () => {
    const n = node(up.port, 'mona');
    // The pool's bound (2) all in stalled openings: the waiting tunnel's refill can open no other.
    await withOpeningsHeld({ perNode: 2, maxPerPool: 2 }, n, async ({ warm }, held) => {
      await until('both openings under way, held', () => held.length >= 2);
      // The openings under way stay stalled; connections from now on (the fresh dial's) are served.
      up.held = null;
      const started = performance.now();
      assert.equal(await tunnel(warm, n), 'user:mona');
      // Not held until the stalled openings' deadline (10 s): its patience (a few opening times, at least
      // 100 ms, checked by the sweep's 1 s tick), then a fresh dial.
      const took = performance.now() - started;
      assert.ok(took < 5000, `served after ${took.toFixed(0)} ms`);
    });
  });

  test('bounded per node and per pool', async () => {
    const { warm } = make({ perNode: 2, maxPerPool: 3 });
    const nodes = [node(up.port, 'e1'), node(up.port, 'e2')];
    for (let i = 0; i < 20; i++) await Promise.all(nodes.map((n) => tunnel(warm, n)));
    await until('warm connections', () => warm.size >= 2);
    // Without a pool (nodes no pool drew) each node is its own bound: 2 per node.
    assert.ok(warm.size <= 4, `${warm.size}`);
    warm.close();
  });
});
