// A plain-HTTP request retried by a request rule (README "Request rules": the response is dropped with its
// upstream connection and the request goes again through another exit): the dropped try's request and what was
// read of its answer crossed the platform and are in the user's quota meter, so the connection record and the
// usage rollups hold them too — every try's bytes, the meter and the bill agree. Before, the record held the
// last try only: 5 requests, meter 303,320 B, bill 1,555 B. Both ways a rule fires on a response: its status
// (at the head) and its body pattern (after the held body bytes).
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { ConnectionRecord } from '../../src/connlog/types.ts';
import { waitFor } from '../support/wait.ts';
import { curl, startGateway, viaHttp, type Gateway } from './harness.ts';

let gw: Gateway;
let server: Server;
let port = 0;
const served = new Map<string, number>();
const BLOCK = Buffer.alloc(60_000, 0x62);
const CAPTCHA = Buffer.concat([Buffer.from('<h1>please solve this captcha</h1>'), Buffer.alloc(40_000, 0x63)]);

before(async () => {
  // Per path prefix, odd requests are blocked (/status: a 503 with a 60,000 B page; /body: a 200 whose body shows
  // a captcha), even ones answered "fine".
  server = createServer((req, res) => {
    if (req.url!.startsWith('/kept')) {
      // A kept connection's second request is reset unanswered (a server gone as its connection was picked).
      const socket = req.socket as typeof req.socket & { served?: number };
      socket.served = (socket.served ?? 0) + 1;
      served.set('kept', (served.get('kept') ?? 0) + 1);
      if (socket.served === 2) socket.resetAndDestroy();
      else res.end('fine');
      return;
    }
    const kind = req.url!.startsWith('/body') ? 'body' : 'status';
    const n = (served.get(kind) ?? 0) + 1;
    served.set(kind, n);
    if (n % 2 === 0) res.end('fine');
    else if (kind === 'status') {
      res.writeHead(503, { 'content-type': 'text/html', 'content-length': String(BLOCK.length) });
      res.end(BLOCK);
    } else {
      res.writeHead(200, { 'content-type': 'text/html', 'content-length': String(CAPTCHA.length) });
      res.end(CAPTCHA);
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  gw = await startGateway({
    config: {
      log: { level: 'warn', access: { flushIntervalMs: 100 } },
      accounts: { flushIntervalMs: 100 },
      users: [
        {
          name: 'rita',
          password: 'rita-pw',
          mainAccount: 'shop1',
          requestRules: [{ name: 'blocked', status: [503], action: 'retry', retries: 1 }],
        },
        { name: 'kora', password: 'kora-pw', mainAccount: 'shop1' },
        {
          name: 'cora',
          password: 'cora-pw',
          mainAccount: 'shop1',
          requestRules: [{ name: 'captcha', body: 'solve this captcha', action: 'retry', retries: 1 }],
        },
      ],
    } as never,
  });
});
after(async () => {
  await gw?.close();
  await new Promise((r) => server.close(r));
});

async function billOf(user: string): Promise<{ records: ConnectionRecord[]; recorded: number; rollups: number; meter: number }> {
  await gw.daemon.connections.recorder.flush();
  const records = (await gw.admin<{ items: ConnectionRecord[] }>(`/v1/connections?user=${user}&limit=100`)).body.items;
  const recorded = records.reduce((n, r) => n + r.bytesUp + r.bytesDown, 0);
  const from = new Date(Date.now() - 3_600_000).toISOString();
  const to = new Date(Date.now() + 3_600_000).toISOString();
  const usage = (
    await gw.admin<{ bytesUp: number; bytesDown: number }[]>(
      `/v1/usage?granularity=hour&user=${user}&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`,
    )
  ).body;
  const rollups = usage.reduce((n, r) => n + r.bytesUp + r.bytesDown, 0);
  const meter = (await gw.admin<{ usedBytes: number }>(`/v1/users/${user}`)).body.usedBytes;
  return { records, recorded, rollups, meter };
}

for (const [user, path] of [
  ['rita', 'status'],
  ['cora', 'body'],
] as const) {
  test(`a request retried by a ${path} rule: the record, the rollups and the quota meter count every try's bytes`, async () => {
    for (let i = 0; i < 5; i++) {
      const r = await curl([...viaHttp(gw.ports.http, user, `${user}-pw`), `http://127.0.0.1:${port}/${path}${i}`]);
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(r.body, 'fine', 'the blocked answer never reached the client');
    }
    assert.equal(served.get(path), 10, 'each request was answered twice by the target');
    let last: Awaited<ReturnType<typeof billOf>> | undefined;
    const story = (): string =>
      `5 requests, 10 answers (every other one blocked and retried); records ${last!.records.length} ` +
      `(${last!.records.map((r) => `${r.result}:${r.bytesUp}/${r.bytesDown}:retries=${r.retries}`).join(', ')}) ` +
      `hold ${last!.recorded} B, the usage rollups ${last!.rollups} B, the quota meter ${last!.meter} B`;
    await waitFor(
      async () => {
        last = await billOf(user);
        return last.records.length === 5 && last.recorded === last.meter && last.rollups === last.meter;
      },
      10_000,
      'the bill to match the meter',
    ).catch(() => assert.fail(story()));
    for (const r of last!.records) assert.equal(r.retries, 1, story());
    // What was read of each dropped answer is in the bill: at least its head (the body rule read its body too).
    const least = 5 * (path === 'status' ? 100 : CAPTCHA.length);
    assert.ok(last!.records.reduce((n, r) => n + r.bytesDown, 0) > least, story());
  });
}

test('a kept upstream connection that fails under a request: the request sent again, both tries billed as metered', async () => {
  // One client connection, two requests: the second goes on the kept upstream, which is reset, and is sent again.
  const url = `http://127.0.0.1:${port}/kept`;
  const r = await curl([...viaHttp(gw.ports.http, 'kora', 'kora-pw'), url, url]);
  assert.equal(r.exitCode, 0, r.stderr);
  assert.match(r.body, /^fine[^]*fine$/);
  assert.equal(served.get('kept'), 3, 'the second request reached the target twice');
  let last: Awaited<ReturnType<typeof billOf>> | undefined;
  await waitFor(
    async () => {
      last = await billOf('kora');
      return last.records.length === 2 && last.recorded === last.meter && last.rollups === last.meter;
    },
    10_000,
    'the bill to match the meter',
  ).catch(() =>
    assert.fail(`records ${JSON.stringify(last?.records)}: ${last?.recorded} B, rollups ${last?.rollups} B, meter ${last?.meter} B`),
  );
});
