// Running out of file descriptors is the daemon's own fault, never an upstream's. `rotor start` runs as a child
// process on a sandbox platform that lives in the test process (so the upstream proxies' descriptors are not
// the daemon's); once it holds a few tunnels, its soft RLIMIT_NOFILE is lowered with prlimit(1) to what it has
// open plus one. The next tunnel's accept takes that last descriptor and its upstream dial fails with EMFILE:
// - the client is answered 503 (a local refusal naming the exhaustion), never 502 as a failed upstream;
// - no node cools, no upstream failure is counted, rotor_descriptor_exhaustion_total{where="dial"} counts it;
// - further attempts on either listener are refused at accept, and all of them give ONE warning line;
// - once the held tunnels close, new tunnels succeed again (accepting resumed, one info line).
// A second case sets the limit to exactly what is open: libuv then closes new connections itself without a
// word; the daemon notices within its sampling interval (where="accept") and recovers the same way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS } from '../../src/sim/index.ts';
import { buyTraffic } from '../support/orders.ts';
import { sumSamples } from '../support/prometheus.ts';
import { cleanup, rawConfig, scrape, spawnDaemon, tempDir, waitFor, writeConfigFile, type ChildDaemon } from './limits-harness.ts';

const PRODUCT = SIM_PRODUCTS.dynamicTraffic;
const USER = 'fdu';
const PASS = 'fdu-pass';
const HELD = 10;
const EXHAUSTED_LINE = /descriptors exhausted/i;

type Outcome = { kind: 'ok'; socket: Socket } | { kind: 'answer'; status: number; text: string } | { kind: 'closed' } | { kind: 'timeout' };

/** A CONNECT through the HTTP listener: the tunnel (kept open), the proxy's answer, or a connection closed without one. */
function httpTunnel(port: number, targetPort: number, timeoutMs = 15_000): Promise<Outcome> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let buf = '';
    let done = false;
    const finish = (o: Outcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.removeAllListeners('data');
      if (o.kind !== 'ok') s.destroy();
      resolve(o);
    };
    const timer = setTimeout(() => finish({ kind: 'timeout' }), timeoutMs);
    let status = 0;
    const ended = (): void => finish(status === 0 ? { kind: 'closed' } : { kind: 'answer', status, text: buf });
    s.on('error', ended);
    s.on('close', ended);
    s.on('connect', () => {
      const auth = Buffer.from(`${USER}:${PASS}`).toString('base64');
      s.write(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
    });
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      if (status !== 0) return;
      status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(buf)?.[1] ?? 0) || -1;
      if (status === 200) finish({ kind: 'ok', socket: s });
      // The body (the reason) follows the head: the answer is complete at the close (or after a moment).
      else setTimeout(ended, 2000).unref();
    });
  });
}

/** A SOCKS5 CONNECT with username/password: 'ok' with the tunnel, the reply code, or closed without one. */
function socksTunnel(port: number, targetPort: number, timeoutMs = 15_000): Promise<Outcome> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let step = 0;
    let done = false;
    const finish = (o: Outcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.removeAllListeners('data');
      if (o.kind !== 'ok') s.destroy();
      resolve(o);
    };
    const timer = setTimeout(() => finish({ kind: 'timeout' }), timeoutMs);
    s.on('error', () => finish({ kind: 'closed' }));
    s.on('close', () => finish({ kind: 'closed' }));
    s.on('connect', () => s.write(Buffer.from([5, 1, 2])));
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (step === 0 && buf.length >= 2) {
        buf = buf.subarray(2);
        step = 1;
        s.write(Buffer.concat([Buffer.from([1, USER.length]), Buffer.from(USER), Buffer.from([PASS.length]), Buffer.from(PASS)]));
      }
      if (step === 1 && buf.length >= 2) {
        if (buf[1] !== 0) return finish({ kind: 'answer', status: 1000 + buf[1]!, text: 'auth refused' });
        buf = buf.subarray(2);
        step = 2;
        s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, targetPort >> 8, targetPort & 0xff]));
      }
      if (step === 2 && buf.length >= 2) {
        if (buf[1] === 0) finish({ kind: 'ok', socket: s });
        else finish({ kind: 'answer', status: buf[1]!, text: `SOCKS5 reply ${buf[1]}` });
      }
    });
  });
}

/** A TCP target that accepts and holds every connection (the far end of each tunnel). */
async function holdTarget(): Promise<{ server: Server; port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    s.on('error', () => {});
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port, sockets };
}

const openDescriptors = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;

/**
 * The soft limit that leaves exactly `free` descriptors to open: the kernel hands out the lowest free number
 * and refuses one at or above the limit, so the limit is the (free+1)-th lowest unused number.
 */
function limitLeaving(pid: number, free: number): number {
  const used = new Set(readdirSync(`/proc/${pid}/fd`).map(Number));
  let seen = 0;
  for (let n = 0; ; n++) if (!used.has(n) && seen++ === free) return n;
}

function hardNofile(pid: number): string {
  const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'))!;
  return line.trim().split(/\s+/)[4]!;
}

/** Lowers (or raises, up to the hard limit) the running daemon's soft descriptor limit. */
function setSoftNofile(pid: number, soft: number): void {
  execFileSync('prlimit', ['--pid', String(pid), `--nofile=${soft}:${hardNofile(pid)}`]);
}

interface Setup {
  daemon: ChildDaemon;
  target: Awaited<ReturnType<typeof holdTarget>>;
  held: Socket[];
  close(): Promise<void>;
}

async function setUp(name: string): Promise<Setup> {
  const sim = await startSimulator({ orderDelayMs: 50 });
  const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
  const target = await holdTarget();
  const dir = tempDir(`rotor-descriptors-${name}-`);
  const file = join(dir, 'rotor.yaml');
  const raw = rawConfig(dir, [{ name: USER, password: PASS, mainAccount: 'shop1', product: PRODUCT }], {
    accounts: { balancePollMs: 300 },
  }) as Record<string, unknown>;
  raw.platform = { mode: 'remote', baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, timeoutMs: 5000, retries: 0 };
  // Nothing opens descriptors behind the test's back: no warm connections, no background probes.
  raw.pool = {
    ...(raw.pool as object),
    drawBatch: 3,
    maxFails: 1,
    warm: { perNode: 0 },
    healthCheck: { intervalMs: 3_600_000 },
  };
  writeConfigFile(file, raw);
  const held: Socket[] = [];
  let daemon: ChildDaemon | undefined;
  const close = async (): Promise<void> => {
    for (const s of held) s.destroy();
    await daemon?.stop();
    for (const s of target.sockets) s.destroy();
    await new Promise((r) => target.server.close(r));
    client.close();
    await sim.close();
  };
  try {
    daemon = await spawnDaemon(file, join(dir, 'rotor.log'));
    // The daemon made the main account at start; traffic bought now reaches the user's pool.
    await buyTraffic(client, 'shop1', PRODUCT, 1024);
    return { daemon, target, held, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Opens HELD tunnels (the first once the bought traffic reached the pool), checking what each costs in descriptors. */
async function holdTunnels(s: Setup): Promise<void> {
  let last: Outcome | undefined;
  const first = await waitFor(
    'a first tunnel (the bought traffic reached the pool)',
    async () => {
      const o = await httpTunnel(s.daemon.ports.http, s.target.port, 5000);
      if (o.kind !== 'ok') last = o;
      return o.kind === 'ok' ? o.socket : undefined;
    },
    30_000,
    200,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}; last answer ${JSON.stringify(last)}; log: ${s.daemon.logText().slice(-3000)}`);
  });
  s.held.push(first);
  const afterFirst = await steadyDescriptors(s);
  for (let i = 1; i < HELD; i++) {
    const o = i % 2 === 0 ? await httpTunnel(s.daemon.ports.http, s.target.port) : await socksTunnel(s.daemon.ports.socks5, s.target.port);
    assert.equal(o.kind, 'ok', `tunnel ${i} before the limit: ${JSON.stringify(o.kind === 'answer' ? o : o.kind)}`);
    s.held.push((o as { socket: Socket }).socket);
  }
  const held = await steadyDescriptors(s);
  // What the README says: 2 descriptors per tunnel (the client's and the upstream's) with the platform elsewhere.
  assert.equal(Math.round((held - afterFirst) / (HELD - 1)), 2, `descriptors per tunnel: ${held - afterFirst} for ${HELD - 1}`);
}

/** The daemon's descriptor count once it stops moving (the pool drawn, the log quiet). */
function steadyDescriptors(s: Setup): Promise<number> {
  let before = -1;
  return waitFor(
    'the daemon to hold a steady number of descriptors',
    () => {
      const n = openDescriptors(s.daemon.pid);
      const steady = n === before;
      before = n;
      return steady ? n : undefined;
    },
    20_000,
    300,
  );
}

const exhaustionLines = (d: ChildDaemon): Array<Record<string, unknown>> =>
  d.lines().filter((l) => typeof l.msg === 'string' && EXHAUSTED_LINE.test(l.msg));

async function assertNothingCooled(d: ChildDaemon): Promise<string> {
  const text = await waitFor('GET /metrics while descriptors are exhausted', () => scrape(d.ports.admin), 20_000, 200);
  assert.equal(sumSamples(text, 'rotor_pool_proxies', { state: 'cooling' }), 0, 'no node of the pool cools');
  assert.equal(sumSamples(text, 'rotor_pool_nodes', { state: 'cooling' }), 0, 'no node anywhere cools');
  assert.equal(sumSamples(text, 'rotor_upstream_failures_total'), 0, 'no upstream failure counted');
  return text;
}

/** After the held tunnels close, a new tunnel succeeds (polled: accepting resumes once descriptors are free). */
async function recovers(s: Setup): Promise<void> {
  for (const h of s.held.splice(0)) h.destroy();
  const back = await waitFor(
    'a new tunnel after the held ones closed',
    async () => {
      const o = await httpTunnel(s.daemon.ports.http, s.target.port, 5000);
      if (o.kind === 'ok') return o.socket;
      return undefined;
    },
    30_000,
    200,
  );
  back.destroy();
  const text = await scrape(s.daemon.ports.admin);
  assert.equal(sumSamples(text, 'rotor_descriptors_exhausted'), 0, 'the episode is over');
  assert.ok(
    s.daemon.lines().some((l) => typeof l.msg === 'string' && /accepting resumed/i.test(l.msg)),
    'one line says accepting resumed',
  );
}

test(
  'EMFILE at the upstream dial: 503 to the client, no node cools, one warning, accepting paused and resumed',
  { timeout: 180_000 },
  async () => {
    const s = await setUp('dial');
    try {
      await holdTunnels(s);
      setSoftNofile(s.daemon.pid, limitLeaving(s.daemon.pid, 1));

      const first = await httpTunnel(s.daemon.ports.http, s.target.port);
      assert.equal(first.kind, 'answer', `the client is answered: ${first.kind}`);
      const answer = first as { status: number; text: string };
      assert.equal(answer.status, 503, `a local refusal, not an upstream failure: ${answer.text}`);
      assert.match(answer.text, /descriptor/i, 'the answer names the cause');

      // More attempts on both listeners while exhausted: none gets a tunnel, none is told an upstream failed.
      for (let i = 0; i < 3; i++) {
        for (const o of [await httpTunnel(s.daemon.ports.http, s.target.port), await socksTunnel(s.daemon.ports.socks5, s.target.port)]) {
          if (o.kind === 'ok') o.socket.destroy();
          assert.notEqual(o.kind, 'ok', 'no tunnel while descriptors are exhausted');
          if (o.kind === 'answer') assert.ok(o.status === 503 || o.status === 1, `a local refusal (503 / SOCKS5 0x01): ${o.status}`);
        }
      }
      const text = await assertNothingCooled(s.daemon);
      assert.ok(sumSamples(text, 'rotor_descriptor_exhaustion_total', { where: 'dial' }) >= 1, 'the failed dial counted');
      assert.equal(sumSamples(text, 'rotor_descriptors_exhausted'), 1, 'the episode shows');
      assert.equal(exhaustionLines(s.daemon).length, 1, 'ONE warning line for the whole episode');
      assert.equal(exhaustionLines(s.daemon)[0]!.level, 40, 'a warning');

      await recovers(s);
      assert.equal(exhaustionLines(s.daemon).length, 1, 'still one warning line');
    } finally {
      await s.close();
      cleanup();
    }
  },
);

test('EMFILE at accept (libuv closes new connections silently): noticed, counted, one warning, resumed', { timeout: 180_000 }, async () => {
  const s = await setUp('accept');
  try {
    await holdTunnels(s);
    setSoftNofile(s.daemon.pid, limitLeaving(s.daemon.pid, 0));

    // Clients keep trying (as real ones do) until the daemon has noticed; none gets a tunnel meanwhile.
    await waitFor(
      'the daemon to notice the exhaustion',
      async () => {
        const o = await httpTunnel(s.daemon.ports.http, s.target.port, 5000);
        if (o.kind === 'ok') o.socket.destroy();
        assert.notEqual(o.kind, 'ok', 'no tunnel while descriptors are exhausted');
        return exhaustionLines(s.daemon).length > 0;
      },
      30_000,
      100,
    );
    const text = await assertNothingCooled(s.daemon);
    assert.ok(sumSamples(text, 'rotor_descriptor_exhaustion_total', { where: 'accept' }) >= 1, 'counted at accept');
    assert.equal(exhaustionLines(s.daemon).length, 1, 'ONE warning line');

    await recovers(s);
  } finally {
    await s.close();
    cleanup();
  }
});
