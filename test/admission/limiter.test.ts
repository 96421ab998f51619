// The per-user limiter (src/admission/limiter.ts): the token bucket's long-run rate over several takers, a live
// rate change, exact connection slots with lapsing reservations, and stopping registered relays.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UserLimiter } from '../../src/admission/limiter.ts';

test('a 512 KiB/s bucket shared by 3 takers of 16 KiB chunks lets through 512 KiB/s', async () => {
  // One 1.5 s run of three takers; the rate it measured.
  const run = async (): Promise<number> => {
    const l = new UserLimiter('u');
    l.setRate(512 * 1024);
    // The limiter's timer is unref'd (sockets keep a daemon alive); here nothing else would.
    const alive = setInterval(() => undefined, 1000);
    let moved = 0;
    const started = performance.now();
    const until = started + 1500;
    const taker = (): Promise<void> =>
      new Promise((resolve) => {
        const step = (): void => {
          if (performance.now() >= until) return resolve();
          moved += 16 * 1024;
          if (l.take(16 * 1024)) setImmediate(step);
          else l.wait(step);
        };
        step();
      });
    await Promise.all([taker(), taker(), taker()]);
    clearInterval(alive);
    l.close();
    return moved / ((performance.now() - started) / 1000);
  };
  // Never over the rate (and its burst), on any run. Under it only when the event loop stalled: the bucket holds
  // at most its burst, so a stalled loop loses rate, as it should. Best of three runs for the lower bound: a
  // loaded machine stalls some runs, a limiter that under-delivers does so in every one.
  const rates: number[] = [];
  for (let i = 0; i < 3; i++) {
    const rate = await run();
    rates.push(rate);
    assert.ok(rate < 1.2 * 512 * 1024 + 64 * 1024, `over the rate: ${Math.round(rate / 1024)} KiB/s`);
    if (rate > 0.85 * 512 * 1024) break;
  }
  const best = Math.max(...rates);
  assert.ok(best > 0.85 * 512 * 1024, `rates ${rates.map((r) => Math.round(r / 1024)).join(', ')} KiB/s`);
});

test('lifting the rate wakes every waiter at once', () => {
  const l = new UserLimiter('u');
  l.setRate(64 * 1024);
  assert.equal(l.take(1024 * 1024), false);
  let woken = 0;
  l.wait(() => woken++);
  l.wait(() => woken++);
  l.setRate(0);
  assert.equal(woken, 2);
  assert.equal(l.take(10 * 1024 * 1024), true);
  l.close();
});

test('connection slots: exact, handed over at open, lapsing when the connection never opens', () => {
  const l = new UserLimiter('u', 1000);
  l.maxConnections = 2;
  assert.equal(l.reserve(0), true);
  assert.equal(l.reserve(0), true);
  assert.equal(l.reserve(0), false);
  l.opened();
  l.opened();
  assert.equal(l.reserve(10), false);
  l.closed();
  assert.equal(l.reserve(10), true); // held by an admission whose connection never opens ...
  assert.equal(l.reserve(500), false);
  assert.equal(l.reserve(1011), true); // ... until it lapses
  l.maxConnections = 0;
  assert.equal(l.reserve(1011), true);
});

test('stopAll stops the registered relays and forgets them', () => {
  const l = new UserLimiter('u');
  let stopped = 0;
  const a = { stop: () => stopped++ };
  const b = { stop: () => stopped++ };
  l.attach(a);
  l.attach(b);
  l.detach(b);
  assert.equal(l.stopAll(), 1);
  assert.equal(stopped, 1);
  assert.equal(l.running, 0);
});
