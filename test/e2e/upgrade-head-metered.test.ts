// An Upgrade (WebSocket) request through the HTTP listener goes to the target through a tunnel, its request
// head first. That head is the customer's data like any other byte: it is metered by the relay (the quota, the
// rate, the record's bytesUp, the usage rollups), as a forwarded plain-HTTP request's head is. Before, it was
// written to the upstream beside the relay: 20 upgrades with 15 KB headers put 301,900 B at the target and 0 B
// in the bill. A head that would cross the user's quota does not reach the target (the connection is cut, as a
// tunnel's chunk that crosses the quota is).
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { after, before, test } from 'node:test';
import type { ConnectionRecord } from '../../src/connlog/types.ts';
import { waitFor } from '../support/wait.ts';
import { startGateway, type Gateway } from './harness.ts';

const TOKEN = 'upgrade-head-token';
let gw: Gateway;
let target: Server;
/** bytes the target read, per user name in the request's path */
const received = new Map<string, number>();
/** the heads the target read, as bytes (latin1), per user name */
const heads = new Map<string, string>();

before(async () => {
  gw = await startGateway({
    config: { admin: { token: TOKEN }, log: { access: { flushIntervalMs: 100 } }, accounts: { flushIntervalMs: 100 } },
  });
  target = createServer((s) => {
    let head = '';
    let who = '';
    s.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      who ||= /^GET \/(\w+)/.exec(head)?.[1] ?? '';
      received.set(who, (received.get(who) ?? 0) + d.length);
      heads.set(who, head);
      if (head.includes('\r\n\r\n')) s.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    });
    s.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', () => resolve()));
  for (const body of [
    { name: 'wsuser', password: 'wsuser-pass-1', mainAccount: 'shop1' },
    { name: 'wsbytes', password: 'wsbytes-pass-1', mainAccount: 'shop1' },
    { name: 'wstight', password: 'wstight-pass-1', mainAccount: 'shop1', quota: { bytes: 10_000, period: 'total' } },
  ]) {
    const made = await gw.admin('/v1/users', { body });
    assert.equal(made.status, 201, JSON.stringify(made.body));
  }
});
after(async () => {
  target?.close();
  await gw?.close();
});

/** One Upgrade request with a `pad`-byte header; resolves with what the client got back once the proxy closed. */
function upgrade(user: string, pad: number, extra = ''): Promise<string> {
  const port = (target.address() as AddressInfo).port;
  return new Promise((resolve, reject) => {
    let answer = '';
    const s = connect(gw.ports.http, '127.0.0.1', () => {
      const head =
        `GET ws://127.0.0.1:${port}/${user} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
        `Proxy-Authorization: Basic ${Buffer.from(`${user}:${user}-pass-1`).toString('base64')}\r\n` +
        `Connection: Upgrade\r\nUpgrade: websocket\r\nX-Pad: ${'p'.repeat(pad)}\r\n${extra}\r\n`;
      s.write(Buffer.from(head, 'latin1'));
    });
    s.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    s.on('close', () => resolve(answer));
    s.on('error', reject);
  });
}

async function records(user: string, count: number): Promise<ConnectionRecord[]> {
  return waitFor(
    async () => {
      await gw.daemon.connections.recorder.flush();
      const items = (await gw.admin<{ items: ConnectionRecord[] }>(`/v1/connections?user=${user}&limit=100`)).body.items;
      return items.length >= count ? items : undefined;
    },
    10_000,
    `${count} records of ${user}`,
  );
}

async function rollups(user: string): Promise<{ up: number; down: number }> {
  const from = new Date(Date.now() - 3_600_000).toISOString();
  const to = new Date(Date.now() + 3_600_000).toISOString();
  const rows = (
    await gw.admin<{ bytesUp: number; bytesDown: number }[]>(
      `/v1/usage?granularity=hour&user=${user}&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`,
    )
  ).body;
  return { up: rows.reduce((n, r) => n + r.bytesUp, 0), down: rows.reduce((n, r) => n + r.bytesDown, 0) };
}

test("an Upgrade request's head, sent on to the target, is metered: record, rollups and quota meter", async () => {
  for (let i = 0; i < 20; i++) assert.match(await upgrade('wsuser', 15_000), /^HTTP\/1\.1 101 /);
  const sent = received.get('wsuser') ?? 0;
  assert.ok(sent > 20 * 15_000, `the target received the 20 heads (${sent} B)`);
  const recs = await records('wsuser', 20);
  const up = recs.reduce((n, r) => n + r.bytesUp, 0);
  const down = recs.reduce((n, r) => n + r.bytesDown, 0);
  assert.equal(up, sent, `the target received ${sent} B from the 20 Upgrade requests; their records bill ${up} B up`);
  const billed = await rollups('wsuser');
  assert.deepEqual(billed, { up, down }, 'the usage rollups hold what the records hold');
  const used = (await gw.admin<{ usedBytes: number }>('/v1/users/wsuser')).body.usedBytes;
  assert.equal(used, up + down, 'the quota meter counted the same bytes');
});

test("an Upgrade's header bytes reach the target as the client sent them (one byte each, counted once)", async () => {
  assert.match(await upgrade('wsbytes', 10, 'X-Name: caf\u00e9 \u00ff\r\n'), /^HTTP\/1\.1 101 /);
  assert.match(heads.get('wsbytes') ?? '', /\r\nX-Name: caf\u00e9 \u00ff\r\n/, 'bytes 0xE9 and 0xFF as sent');
  const [rec] = await records('wsbytes', 1);
  assert.equal(rec!.bytesUp, received.get('wsbytes'));
});

test('an Upgrade whose head would cross the quota does not reach the target', async () => {
  // Within the quota (10,000 B) an upgrade goes through, counted.
  assert.match(await upgrade('wstight', 100), /^HTTP\/1\.1 101 /);
  const first = received.get('wstight') ?? 0;
  const [ok] = await records('wstight', 1);
  assert.equal(ok!.bytesUp, first);
  // A 15 KB head would cross it: the connection is cut before any byte of it reaches the target.
  const answer = await upgrade('wstight', 15_000);
  assert.doesNotMatch(answer, /101/, 'no switch');
  assert.equal(received.get('wstight'), first, 'the target received none of the second head');
  const cut = (await records('wstight', 2)).find((r) => r.id !== ok!.id)!;
  // Cut as a tunnel's chunk that crosses the quota is: dropped, and counted (the relay's rule).
  assert.equal(cut.reason, 'limit', JSON.stringify(cut));
});
