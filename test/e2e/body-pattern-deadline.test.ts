// The second line behind the body-pattern guard: a pattern the guard accepts can still be slow on a page built for
// it (`(?:a×400){0,127}b` over 64 KiB of "a": ~1 s of backtracking per page, the guard costs the 128 ways, not the
// 400 characters each walks). Body patterns run on a thread of their own under a 100 ms deadline
// (src/proxy/request-rules-matcher.ts): while four such pages are matched, another customer's request through the same
// daemon is answered at once and the event loop never stalls; a stopped match counts as not matched
// (`bodyTimeout: pass`, the default: the page goes to the client untouched) or fires the rule (`fire`: the record
// names it). Real daemon on the embedded sandbox, real sockets, curl through the HTTP listener.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { ConnectionRecord } from '../../src/connlog/types.ts';
import { curl, startGateway, startTarget, viaHttp, type Gateway, type Target } from './harness.ts';

const HOSTILE = `(?:${'a'.repeat(400)}){0,127}b`;
const PAGE = 64 * 1024;
let gw: Gateway;
let pages: Server;
let pagesPort = 0;
let target: Target;
/** Resolved when the page server has written a hostile page (the daemon is matching it from then on). */
let written: () => void = () => undefined;

before(async () => {
  gw = await startGateway({
    config: {
      users: [
        { name: 'alice', password: 'alice-pass', mainAccount: 'shop1' },
        {
          name: 'scraper',
          password: 'scraper-pass',
          mainAccount: 'shop1',
          requestRules: [{ name: 'slow-pass', body: HOSTILE, bodyBytes: PAGE, action: 'tag' }],
        },
        {
          name: 'firer',
          password: 'firer-pass',
          mainAccount: 'shop1',
          requestRules: [{ name: 'slow-fire', body: HOSTILE, bodyBytes: PAGE, action: 'tag', bodyTimeout: 'fire' }],
        },
      ],
    } as never,
  });
  pages = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html', 'content-length': PAGE });
    res.end('a'.repeat(PAGE), () => written());
  });
  await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', () => resolve()));
  pagesPort = (pages.address() as AddressInfo).port;
  target = await startTarget();
});
after(async () => {
  pages?.closeAllConnections();
  await new Promise<void>((resolve) => pages?.close(() => resolve()));
  await target?.close();
  await gw?.close();
});

const page = (user: string, i: number) =>
  curl([...viaHttp(gw.ports.http, user, `${user}-pass`), `http://127.0.0.1:${pagesPort}/p${i}`], { maxTimeS: 120 });

test("another customer's request is answered at once while hostile pages are matched; the loop never stalls", async () => {
  // Warm both users' logins and pools: what is timed below is the proxy's answer, not a first draw.
  assert.equal((await curl([...viaHttp(gw.ports.http, 'alice', 'alice-pass'), target.url('/warm')])).status, 200);
  assert.equal((await page('scraper', 0)).status, 200);

  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const firstWritten = new Promise<void>((resolve) => (written = resolve));
  const hostile = [1, 2, 3, 4].map((i) => page('scraper', i));
  await firstWritten;
  // A hostile page is in the daemon now: its match has begun (on the event loop it would hold it ~1 s per page).
  const started = performance.now();
  const other = await curl([...viaHttp(gw.ports.http, 'alice', 'alice-pass'), target.url('/meanwhile')]);
  const otherMs = performance.now() - started;
  const done = await Promise.all(hostile);
  delay.disable();
  assert.equal(other.status, 200, other.stderr);
  for (const r of done) {
    assert.equal(r.status, 200, r.stderr);
    assert.equal(r.body.length, PAGE, 'the page passes whole (bodyTimeout pass: not matched)');
  }
  const maxMs = Math.round(delay.max / 1e6);
  console.log(`# another customer's request: ${otherMs.toFixed(0)} ms; event loop's longest stall: ${maxMs} ms`);
  assert.ok(otherMs < 1000, `another customer's request waited ${otherMs.toFixed(0)} ms behind the hostile match`);
  assert.ok(maxMs < 500, `the event loop stalled ${maxMs} ms`);
});

test('bodyTimeout: pass leaves the record untouched; fire fires the rule it stopped on', async () => {
  assert.equal((await page('firer', 9)).status, 200);
  await gw.daemon.connections.recorder.flush();
  const records = async (user: string) =>
    (await gw.admin<{ items: ConnectionRecord[] }>(`/v1/connections?user=${user}&limit=100`)).body.items.filter((r) =>
      r.target?.includes(String(pagesPort)),
    );
  const passed = await records('scraper');
  assert.ok(passed.length >= 5);
  assert.ok(
    passed.every((r) => r.rule === undefined || r.rule === null),
    `pass: no rule fired (${JSON.stringify(passed.map((r) => r.rule))})`,
  );
  const fired = await records('firer');
  assert.equal(fired.length, 1);
  assert.equal(fired[0]!.rule, 'slow-fire');
});
