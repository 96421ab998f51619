// Issue 23 items 2 and 3 against the real daemon on the sandbox, with real clients over real sockets:
// wrong-password floods must not stall the event loop (scrypt ran synchronously: a core at 98 %, a customer's
// requests from 11 ms to 579 ms), an unknown name must cost what a known one costs (1.5-6 ms against 33-160 ms),
// and failures back off per address and per user name, counted and logged once per address per interval.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/telemetry/logger.ts';
import { nodeHttpGet, startGateway, startTarget, type Gateway, type Target } from './harness.ts';

const ALICE = 'alice';
const ALICE_PASS = 'alice-pass';
const CAROL_PASS = 'carol-password-1';

const basic = (user: string, pass: string) => `Proxy-Authorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}\r\n`;

/** A kept-alive plain-HTTP client connection (opened again when the listener closed it): one request at a time. */
class RawClient {
  private socket: Socket | undefined;
  private buffer = '';
  private waiting: ((status: number) => void) | undefined;
  constructor(private readonly port: number) {}
  private open(): Socket {
    const socket = connect({ host: '127.0.0.1', port: this.port });
    this.buffer = '';
    socket.setEncoding('latin1');
    socket.on('error', () => undefined);
    socket.on('data', (d: string) => {
      this.buffer += d;
      // Every answer here carries a Content-Length body: read the head, skip the body.
      const at = this.buffer.indexOf('\r\n\r\n');
      if (at < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(this.buffer.slice(0, at))?.[1] ?? 0);
      if (this.buffer.length < at + 4 + length) return;
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(this.buffer)?.[1] ?? 0);
      this.buffer = this.buffer.slice(at + 4 + length);
      const w = this.waiting;
      this.waiting = undefined;
      w?.(status);
    });
    socket.on('close', () => {
      if (this.socket === socket) this.socket = undefined;
      const w = this.waiting;
      this.waiting = undefined;
      w?.(0);
    });
    return socket;
  }
  request(url: string, user: string, pass: string): Promise<number> {
    const socket = (this.socket ??= this.open());
    return new Promise((resolve) => {
      this.waiting = resolve;
      socket.write(`GET ${url} HTTP/1.1\r\nHost: x\r\n${basic(user, pass)}\r\n`);
    });
  }
  close(): void {
    this.socket?.destroy();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** The mean of the three fastest: what a check costs when nothing else holds the core. */
const fastest = (xs: number[]) =>
  [...xs]
    .sort((a, b) => a - b)
    .slice(0, 3)
    .reduce((a, b) => a + b, 0) / 3;

describe('password checks off the event loop, equal work for every name', () => {
  let gw: Gateway;
  let target: Target;
  let dir: string | undefined;
  before(async () => {
    // carol is made through the API, then the daemon restarts: her password has not been checked in this
    // process (the report's case). No back-off and no answer delay: what is measured is the checks themselves.
    dir = mkdtempSync(join(tmpdir(), 'rotor-abuse-auth-'));
    const store = { path: join(dir, 'rotor.db') };
    const first = await startGateway({ config: { store } });
    const made = await first.admin('/v1/users', { body: { name: 'carol', password: CAROL_PASS, mainAccount: 'shop1' } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    await first.close();
    [gw, target] = await Promise.all([
      startGateway({
        config: {
          store,
          proxy: { auth: { failureDelayMs: 0, sourceFailures: 0, userFailures: 0, maxPendingPerSource: 64, maxQueuedHashes: 256 } },
        },
      }),
      startTarget(),
    ]);
  });
  after(async () => {
    await gw?.close();
    await target?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test(
    '32 connections flooding distinct wrong passwords: the event loop stays free and a customer keeps being served',
    { timeout: 120_000 },
    async () => {
      const legit = new RawClient(gw.ports.http);
      assert.equal(await legit.request(target.url('/warm'), ALICE, ALICE_PASS), 200);
      const before = await gw.metric('rotor_auth_failures_total', { reason: 'credentials' });
      let stop = false;
      let attempts = 0;
      const floodTimes: number[] = [];
      const flooders = Array.from({ length: 32 }, async (_, w) => {
        const c = new RawClient(gw.ports.http);
        try {
          for (let i = 0; !stop; i++) {
            const t = performance.now();
            const status = await c.request(target.url('/f'), 'carol', `wrong-${w}-${i}`);
            floodTimes.push(performance.now() - t);
            assert.equal(status, 407);
            attempts++;
          }
        } finally {
          c.close();
        }
      });
      const delay = monitorEventLoopDelay({ resolution: 5 });
      const latencies: number[] = [];
      try {
        // Flooding: a first wave of checks has been answered.
        while (attempts < 32) await Promise.race([new Promise((r) => setTimeout(r, 20)), ...flooders]);
        delay.enable();
        for (let i = 0; i < 16; i++) {
          const t = performance.now();
          assert.equal(await legit.request(target.url(`/l${i}`), ALICE, ALICE_PASS), 200);
          latencies.push(performance.now() - t);
        }
        delay.disable();
      } finally {
        stop = true;
        await Promise.allSettled(flooders);
        legit.close();
      }
      await Promise.all(flooders);
      const [customer, flood] = [median(latencies), median(floodTimes)];
      console.log(
        `# flood: ${attempts} wrong passwords answered in ${flood.toFixed(0)} ms (median); customer p50 ${customer.toFixed(1)} ms max ${Math.max(...latencies).toFixed(1)} ms; event-loop delay p50 ${(delay.percentile(50) / 1e6).toFixed(1)} ms max ${(delay.max / 1e6).toFixed(1)} ms`,
      );
      // With scrypt on the event loop a customer's request waits behind the same hashes as the flood's answers
      // (579 ms against 11 ms quiet in the report); checked on the thread pool, only the flood waits for them.
      assert.ok(customer < flood / 4, `customer p50 ${customer.toFixed(1)} ms, flood's answers ${flood.toFixed(1)} ms`);
      assert.equal(await gw.metric('rotor_auth_failures_total', { reason: 'credentials' }), before + attempts);
    },
  );

  test('an unknown name costs the same check as a known one (within 2x)', { timeout: 60_000 }, async () => {
    const c = new RawClient(gw.ports.http);
    const unknown: number[] = [];
    const known: number[] = [];
    for (let i = 0; i < 15; i++) {
      let t = performance.now();
      assert.equal(await c.request(target.url('/u'), `nobody${i}`, `guess-${i}`), 407);
      unknown.push(performance.now() - t);
      t = performance.now();
      assert.equal(await c.request(target.url('/k'), 'carol', `guess-${i}`), 407);
      known.push(performance.now() - t);
    }
    c.close();
    // The cost of a check is what the fastest answers took: the hash threads run at hashNice, so on a loaded
    // machine any single answer (and even a median of nine) can wait twice as long for a core. Without the
    // dummy hash an unknown name answers in a few ms every time, and its fastest is far below a known one's.
    const [u, k] = [fastest(unknown), fastest(known)];
    console.log(
      `# 407 answers, fastest three: unknown name ${u.toFixed(1)} ms, known name ${k.toFixed(1)} ms (medians ${median(unknown).toFixed(1)} / ${median(known).toFixed(1)})`,
    );
    // On a machine loaded enough that an answer's median is ~700 ms, one side's three fastest can all be lucky
    // (fastest 370 vs 146 ms, medians 680 vs 702 ms): either figure within 2x is the same cost. Without the
    // dummy hash both read an unknown name at a few ms against a known one's tens to hundreds.
    const within2x = (a: number, b: number): boolean => a > b / 2 && b > a / 2;
    const [mu, mk] = [median(unknown), median(known)];
    assert.ok(
      within2x(u, k) || within2x(mu, mk),
      `unknown ${u.toFixed(1)} ms vs known ${k.toFixed(1)} ms (medians ${mu.toFixed(1)} / ${mk.toFixed(1)})`,
    );
    // The known user's right password still passes (its first check after the wrong ones). The embedded
    // sandbox forgot her sub account at the restart, so what follows the login may fail: not a 407.
    const ok = await nodeHttpGet(gw.ports.http, 'carol', CAROL_PASS, target.url('/ok'));
    assert.notEqual(ok.status, 407, ok.body);
  });
});

describe('back-off per address and per user name', () => {
  let gw: Gateway;
  let target: Target;
  const lines: { msg?: string; source?: string; failures?: number }[] = [];
  before(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) lines.push(JSON.parse(line) as (typeof lines)[number]);
        done();
      },
    });
    [gw, target] = await Promise.all([
      startGateway({
        config: {
          proxy: {
            auth: {
              failureDelayMs: 150,
              sourceFailures: 6,
              userFailures: 3,
              blockMs: 60_000,
              failureWindowMs: 60_000,
              logIntervalMs: 60_000,
            },
          },
        },
        daemon: { logger: createLogger({ level: 'warn', destination: sink }) },
      }),
      startTarget(),
    ]);
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  test(
    'failures are answered late; a name, then an address, is refused without a check; proven customers pass; one log line',
    { timeout: 60_000 },
    async () => {
      const c = new RawClient(gw.ports.http);
      assert.equal(await c.request(target.url('/a'), ALICE, ALICE_PASS), 200);
      // Three wrong passwords for bob: each answered no sooner than 150 ms; then bob's name is blocked, so even
      // his right password (never proven in this process) is refused, with a reason that says to wait.
      for (let i = 0; i < 3; i++) {
        const t = performance.now();
        assert.equal(await c.request(target.url('/b'), 'bob', `wrong-${i}`), 407);
        assert.ok(performance.now() - t >= 140, `answered after ${(performance.now() - t).toFixed(0)} ms`);
      }
      const blockedName = await nodeHttpGet(gw.ports.http, 'bob', 'bob-pass', target.url('/b'));
      assert.equal(blockedName.status, 407);
      assert.match(blockedName.body, /too many failed logins for this user name/);
      // Three more failures (unknown names, counted the same) block the address: a pair never proven is refused.
      for (let i = 0; i < 3; i++) assert.equal(await c.request(target.url('/x'), `ghost${i}`, 'x'), 407);
      const blocked = await nodeHttpGet(gw.ports.http, 'ghost9', 'x', target.url('/x'));
      assert.match(blocked.body, /too many failed logins from this address/);
      // A customer already proven keeps working from the blocked address, with new session ids too.
      assert.equal(await c.request(target.url('/a2'), ALICE, ALICE_PASS), 200);
      assert.equal((await nodeHttpGet(gw.ports.http, `${ALICE}-session-s77`, ALICE_PASS, target.url('/a3'))).status, 200);
      c.close();
      assert.equal(await gw.metric('rotor_auth_failures_total', { reason: 'credentials' }), 6);
      assert.ok((await gw.metric('rotor_auth_failures_total', { reason: 'blocked_user' })) >= 1);
      assert.ok((await gw.metric('rotor_auth_failures_total', { reason: 'blocked_source' })) >= 1);
      const logged = lines.filter((l) => l.msg === 'failed proxy logins from this address');
      assert.equal(logged.length, 1, JSON.stringify(logged));
      assert.equal(logged[0]!.source, '127.0.0.1');
      // The blocks end on time (the gateway's clock): bob's right password works again.
      gw.clock.advance(61_000);
      assert.equal((await nodeHttpGet(gw.ports.http, 'bob', 'bob-pass', target.url('/b2'))).status, 200);
    },
  );
});
