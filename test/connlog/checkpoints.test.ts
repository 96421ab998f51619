// Open connections are checkpointed into the usage rollups (log.access.checkpointMs): one download kept open
// over three hours of an injected clock lands in each of its hours, GET /v1/usage for the current hour holds
// the bytes of the connection while it is still open, the record of the running connection says `open` with
// its bytes so far, and at the end the hours add up to the record exactly, the connection counted once.
// The real daemon on the embedded sandbox, a real SOCKS5 client, a loopback target paced by its own clock.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { manualClock, startGateway, type Gateway } from '../e2e/harness.ts';
import { startTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { waitFor } from '../support/wait.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import type { ConnectionRecord } from '../../src/connlog/types.ts';

const HOUR = 3_600_000;
const MIB = 1024 * 1024;

interface UsageRow {
  user: string;
  period: string;
  bytesUp: number;
  bytesDown: number;
  connections: number;
  failures: number;
}

describe('usage rollups: open connections checkpointed into the hours they relay in', () => {
  let gw: Gateway;
  let target: BytesTarget;
  const clock = manualClock();
  // 20:30 UTC today on the daemon's clock: three hours that stay in one day.
  const dayStart = Math.floor(Date.now() / 86_400_000) * 86_400_000;
  clock.advance(dayStart + 20.5 * HOUR - Date.now());
  const firstHour = Math.floor(clock.now() / HOUR) * HOUR;

  before(async () => {
    target = await startTarget();
    gw = await startGateway({
      clock,
      config: {
        log: { level: 'warn', access: { flushIntervalMs: 100, checkpointMs: 100 } },
        users: [{ name: 'hugo', password: 'hugo-pw', mainAccount: 'shop1' }],
      },
    });
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  const hourRows = async (): Promise<Map<number, UsageRow>> => {
    const from = new Date(firstHour).toISOString();
    const to = new Date(firstHour + 4 * HOUR).toISOString();
    const r = await gw.admin<UsageRow[]>(`/v1/usage?from=${from}&to=${to}&granularity=hour&user=hugo`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return new Map(r.body.map((row) => [Date.parse(row.period), row]));
  };

  test('a download over three hours: each hour holds its bytes while open; the sum is the record', async () => {
    const socket: Socket = connect({ host: '127.0.0.1', port: gw.ports.socks5 });
    let received = 0;
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.once('connect', () =>
        socks5Connect(socket, { host: '127.0.0.1', port: target.port }, { username: 'hugo', password: 'hugo-pw' }, (err) => {
          if (err) return reject(err);
          socket.on('data', (c: Buffer) => (received += c.length));
          socket.resume();
          socket.write(`GET /bytes/${1024 * MIB}?rate=${4 * MIB} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
          resolve();
        }),
      );
    });
    try {
      for (let h = 0; h < 3; h++) {
        const hour = firstHour + h * HOUR;
        const mark = received;
        await waitFor(() => received >= mark + MIB, 20_000, `a MiB more in hour ${h}`);
        // The current hour's row holds the open connection's bytes (no connection counted yet).
        const row = await waitFor(
          async () => {
            const r = (await hourRows()).get(hour);
            return r && r.bytesDown >= MIB ? r : undefined;
          },
          10_000,
          `hour ${h}'s row while the download is open`,
        );
        assert.equal(row.connections, 0, 'an open connection is counted when it ends');
        if (h === 0) {
          const live = await gw.admin<{ items: ConnectionRecord[] }>('/v1/connections?user=hugo&result=open');
          assert.equal(live.body.items.length, 1, 'the running connection is stored as open');
          assert.ok(live.body.items[0]!.bytesDown >= MIB);
        }
        if (h < 2) clock.advance(HOUR);
      }
    } finally {
      socket.destroy();
    }
    const record = await waitFor(
      async () => {
        await gw.daemon.connections.recorder.flush();
        const r = await gw.admin<{ items: ConnectionRecord[] }>('/v1/connections?user=hugo');
        const rec = r.body.items[0];
        return rec && rec.result !== 'open' ? rec : undefined;
      },
      10_000,
      'the final record',
    );
    assert.equal(record.result, 'ok');
    const rows = await hourRows();
    assert.deepEqual([...rows.keys()].sort(), [firstHour, firstHour + HOUR, firstHour + 2 * HOUR], 'three hours, each with bytes');
    let down = 0;
    let up = 0;
    let connections = 0;
    for (const r of rows.values()) {
      assert.ok(r.bytesDown >= MIB, `${r.period}: ${r.bytesDown} B`);
      down += r.bytesDown;
      up += r.bytesUp;
      connections += r.connections;
    }
    assert.equal(down, record.bytesDown, 'the hours add up to the record');
    assert.equal(up, record.bytesUp);
    assert.equal(connections, 1, 'the connection is counted once, in the hour it ended');
    assert.equal(rows.get(firstHour + 2 * HOUR)!.connections, 1);
    const from = new Date(firstHour).toISOString();
    const day = await gw.admin<UsageRow[]>(
      `/v1/usage?from=${from}&to=${new Date(firstHour + 4 * HOUR).toISOString()}&granularity=day&user=hugo`,
    );
    assert.equal(day.body.length, 1);
    assert.equal(day.body[0]!.bytesDown, record.bytesDown);
  });
});
