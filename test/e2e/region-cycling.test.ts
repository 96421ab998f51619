// Pools are per (user, product, region), at most pool.maxPerUser per user (least recently used idle one closed for
// a new one). A customer cycling more valid regions than that made every connection a new pool and a draw: a
// platform call per connection (45 CONNECTs cycling 9 regions cost 45 DrawByPwd). Replacing a pool is now
// rationed per user (src/pool/registry.ts: pool.replacePerMinute, a burst of 2 x maxPerUser); past it the new
// region is refused 403 with a one-line reason, the user's pools stay. pool.maxPerUser 4 to fit the sandbox's
// codes. Real daemon on the embedded sandbox, raw CONNECTs.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, startTarget, type Gateway, type Target } from './harness.ts';
import { connectHead, connectStatus } from '../support/connect-head.ts';

let gw: Gateway;
let target: Target;
before(async () => {
  gw = await startGateway({ config: { pool: { maxPerUser: 4 } } });
  target = await startTarget();
});
after(async () => {
  await target?.close();
  await gw?.close();
});

const status = (user: string, pass: string) => connectStatus(gw.ports.http, target.port, user, pass);
const head = (user: string, pass: string) => connectHead(gw.ports.http, target.port, user, pass);

test('cycling 6+ valid regions past pool.maxPerUser 4: platform calls stay bounded, not one per connection', async () => {
  const candidates = [
    'CHN',
    'JPN',
    'SGP',
    'USA',
    'DEU',
    'GBR',
    'AS',
    'NA',
    'EU',
    'CHN001',
    'USA005',
    'CHN001001',
    'USA005001',
    'JPN013001',
  ];
  const areas: string[] = [];
  const warm: Record<string, number> = {};
  for (const code of candidates) {
    warm[code] = await status(`alice-region-${code}`, 'alice-pass'); // warm-up: every pool once
    if (warm[code] === 200) areas.push(code);
  }
  assert.ok(areas.length >= 6, `regions served: ${JSON.stringify(warm)}`);
  const calls = (): Record<string, number> => ({ ...(gw.daemon.sim!.inspect.calls() as Record<string, number>) });
  const before = calls();
  const statuses: number[] = [];
  for (let round = 0; round < 5; round++) for (const code of areas) statuses.push(await status(`alice-region-${code}`, 'alice-pass'));
  const now = calls();
  const diff: Record<string, number> = Object.fromEntries(
    Object.entries(now)
      .map(([k, v]) => [k, v - (before[k] ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
  const total = Object.values(diff).reduce((n, v) => n + v, 0);
  assert.ok(
    total < 10,
    `${statuses.length} CONNECTs cycling ${areas.length} regions cost ${total} platform calls: ${JSON.stringify(diff)} (answers ${[...new Set(statuses)]})`,
  );
  // What is not served is refused as the customer's doing (403 with the reason), not failed as a platform's (503).
  assert.ok(
    statuses.every((x) => x === 200 || x === 403),
    `answers ${[...new Set(statuses)]}`,
  );
  let refusal = '';
  for (const code of areas) {
    const t = await head(`alice-region-${code}`, 'alice-pass');
    if (t.startsWith('HTTP/1.1 403')) refusal = t;
  }
  assert.match(refusal, /too many regions or products at once.*pool\.replacePerMinute/, refusal);
});
