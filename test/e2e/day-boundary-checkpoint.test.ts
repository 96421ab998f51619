// README "Usage": "an hour's row holds the bytes relayed in that hour". Checkpoints ran every
// log.access.checkpointMs (default 60 s) from the recorder's start, not at period boundaries, so the bytes an open
// connection relayed between its last checkpoint and midnight (UTC) went into the NEXT day's row (and the next
// hour's, the next month's): 2,097,321 B relayed before midnight, the day row 0 B, the next day's all 2,181,207 B.
// Now open connections are also checkpointed at every hour boundary of the recorder's clock. Real daemon with the
// default checkpointMs, a real SOCKS5 download, the daemon's injected clock standing at 23:59:30 while the bytes
// are relayed and moved 40 s on (past midnight) before the download ends (what 40 real seconds would do; the
// boundary's timer is then 30 real seconds away, so the end of the download, past the boundary, checkpoints first).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { manualClock, startGateway, type Gateway } from '../e2e/harness.ts';
import { startTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { waitFor } from '../support/wait.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import type { ConnectionRecord } from '../../src/connlog/types.ts';

const MIB = 1024 * 1024;
const DAY = 86_400_000;
let gw: Gateway;
let target: BytesTarget;
const clock = manualClock();
const midnight = Math.floor(Date.now() / DAY) * DAY + DAY;
clock.advance(midnight - 30_000 - Date.now()); // 23:59:30 UTC on the daemon's clock

before(async () => {
  target = await startTarget();
  gw = await startGateway({
    clock,
    config: {
      log: { level: 'warn', access: { flushIntervalMs: 100 } }, // checkpointMs: the default (60 s)
      users: [{ name: 'dora', password: 'dora-pw', mainAccount: 'shop1' }],
    },
  });
});
after(async () => {
  await gw?.close();
  await target?.close();
});

test("bytes relayed before midnight are in that day's row, not the next day's", async (t) => {
  const socket: Socket = connect({ host: '127.0.0.1', port: gw.ports.socks5 });
  let received = 0;
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.once('connect', () =>
      socks5Connect(socket, { host: '127.0.0.1', port: target.port }, { username: 'dora', password: 'dora-pw' }, (err) => {
        if (err) return reject(err);
        socket.on('data', (c: Buffer) => (received += c.length));
        socket.resume();
        socket.write(`GET /bytes/${1024 * MIB}?rate=${4 * MIB} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
        resolve();
      }),
    );
  });
  await waitFor(() => received >= 2 * MIB, 20_000, '2 MiB before midnight');
  const beforeMidnight = received;
  clock.advance(40_000); // 00:00:10 of the next day
  socket.destroy();
  const record = await waitFor(
    async () => {
      await gw.daemon.connections.recorder.flush();
      const r = await gw.admin<{ items: ConnectionRecord[] }>('/v1/connections?user=dora');
      const rec = r.body.items[0];
      return rec && rec.result !== 'open' ? rec : undefined;
    },
    10_000,
    'the final record',
  );
  const from = new Date(midnight - DAY).toISOString();
  const to = new Date(midnight + DAY).toISOString();
  const rows = (await gw.admin<{ period: string; bytesDown: number }[]>(`/v1/usage?from=${from}&to=${to}&granularity=day&user=dora`)).body;
  const day = (ms: number) => rows.find((r) => Date.parse(r.period) === ms)?.bytesDown ?? 0;
  const story =
    `${beforeMidnight} B received before midnight (clock ${new Date(midnight - 30_000).toISOString()}), the record ${record.bytesDown} B; ` +
    `day rows: ${new Date(midnight - DAY).toISOString().slice(0, 10)} ${day(midnight - DAY)} B, ${new Date(midnight).toISOString().slice(0, 10)} ${day(midnight)} B`;
  t.diagnostic(story);
  assert.ok(day(midnight - DAY) >= beforeMidnight, story);
});
