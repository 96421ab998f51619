// Billing across stops, with `rotor start` as a child process (the real CLI and its signal handling, a SQLite
// file, the embedded sandbox over real HTTP with real encryption, a real SOCKS5 client): a download still open
// when SIGTERM's drain ends is recorded (result `shutdown`, its bytes up to the cut) in the store, the usage
// rollups and the JSON-lines file, within 1 % of the bytes the client received; after a SIGKILL the
// connection's last checkpoint is on disk, so at most one checkpoint interval of its bytes is missing, and
// the meter and the records agree within it.
//
// The download is 64 MiB paced at 16 MiB/s by the target and cut after >= 6 MiB (not the 500 MB of the
// report: the figure that matters is the ratio, and the suite must stay fast).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { socks5Connect } from '../support/socks5-connect.ts';
import {
  adminGet,
  cleanup,
  rawConfig,
  spawnDaemon,
  startTarget,
  tempDir,
  waitFor,
  writeConfigFile,
  type BytesTarget,
  type ChildDaemon,
} from '../e2e/limits-harness.ts';

const MIB = 1024 * 1024;
const RATE = 16 * MIB;
const TOTAL = 64 * MIB;

interface Download {
  /** bytes the client has received so far (HTTP head included: what the record's bytesDown counts) */
  received(): number;
  /** resolves once the connection is gone (the cut) */
  closed: Promise<void>;
}

/** GET `path` from the target through the daemon's SOCKS5 port, counting every byte that arrives. */
function download(socksPort: number, user: string, pass: string, targetPort: number, path: string): Promise<Download> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect({ host: '127.0.0.1', port: socksPort });
    let received = 0;
    const closed = new Promise<void>((r) => s.once('close', () => r()));
    s.once('error', reject);
    s.once('connect', () => {
      socks5Connect(s, { host: '127.0.0.1', port: targetPort }, { username: user, password: pass }, (err, head) => {
        if (err) return reject(err);
        received += head?.length ?? 0;
        s.on('data', (c: Buffer) => {
          received += c.length;
        });
        s.resume();
        s.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\n\r\n`);
        resolve({ received: () => received, closed });
      });
    });
  });
}

interface Row {
  id: string;
  user: string;
  bytesUp: number;
  bytesDown: number;
  result: string;
  reason: string | null;
}

function configFor(dir: string, access: Record<string, unknown>, accounts: Record<string, unknown> = {}): Record<string, unknown> {
  const raw = rawConfig(dir, [{ name: 'erin', password: 'erin-pw', mainAccount: 'shop1' }], { accounts }) as Record<string, unknown>;
  const proxy = { ...(raw.proxy as Record<string, unknown>), drainMs: 300 };
  return { ...raw, proxy, log: { level: 'info', access: { flushIntervalMs: 200, ...access } } };
}

async function usageDown(adminPort: number, user: string): Promise<{ hour: number; day: number }> {
  const from = new Date(Date.now() - 2 * 86_400_000).toISOString();
  const to = new Date(Date.now() + 86_400_000).toISOString();
  const sum = async (granularity: string): Promise<number> => {
    const rows = await adminGet<{ user: string; bytesDown: number }[]>(
      adminPort,
      `/v1/usage?from=${from}&to=${to}&granularity=${granularity}`,
    );
    return rows.filter((r) => r.user === user).reduce((n, r) => n + r.bytesDown, 0);
  };
  return { hour: await sum('hour'), day: await sum('day') };
}

async function usedBytes(adminPort: number, user: string): Promise<number> {
  return (await adminGet<{ usedBytes: number }>(adminPort, `/v1/users/${user}`)).usedBytes;
}

/** The download under way past 6 MiB; on a failure the daemon is killed (else the file would hang) and its log shown. */
async function started(d: ChildDaemon, start: () => Promise<Download>): Promise<Download> {
  try {
    const dl = await start();
    await waitFor(`6 MiB delivered (${MIB})`, () => dl.received() >= 6 * MIB, 20_000);
    return dl;
  } catch (err) {
    d.signal('SIGKILL');
    await d.exited;
    throw new Error(`${String(err)}\n${d.logText().slice(-3000)}`);
  }
}

const within = (actual: number, expected: number, fraction: number): boolean => Math.abs(actual - expected) <= expected * fraction;

describe('rotor start: open connections are billed across a stop', () => {
  let target: BytesTarget;
  before(async () => {
    target = await startTarget();
  });
  after(async () => {
    await target?.close();
    cleanup();
  });

  test('SIGTERM during a download, then a restart: store, rollups, file and meter hold the delivered bytes within 1 %', async () => {
    const dir = tempDir();
    const file = join(dir, 'rotor.yaml');
    const jsonl = join(dir, 'connections.jsonl');
    writeConfigFile(file, configFor(dir, { file: jsonl, checkpointMs: 60_000 }));
    let d: ChildDaemon = await spawnDaemon(file, join(dir, 'rotor.log'));
    const dl = await started(d, () => download(d.ports.socks5, 'erin', 'erin-pw', target.port, `/bytes/${TOTAL}?rate=${RATE}`));
    d.signal('SIGTERM');
    const exit = await d.exited;
    await dl.closed;
    assert.equal(exit.code, 0, d.logText().slice(-2000));
    const delivered = dl.received();
    assert.ok(delivered < TOTAL, `the download was cut (${delivered} of ${TOTAL})`);

    d = await spawnDaemon(file, join(dir, 'rotor2.log'));
    try {
      const rows = await adminGet<{ items: Row[] }>(d.ports.admin, '/v1/connections?user=erin&limit=10');
      const cut = rows.items.filter((r) => r.result === 'shutdown');
      assert.equal(cut.length, 1, JSON.stringify(rows.items));
      const rec = cut[0]!;
      assert.ok(within(rec.bytesDown, delivered, 0.01), `record ${rec.bytesDown} B down, client got ${delivered} B`);
      const usage = await usageDown(d.ports.admin, 'erin');
      assert.ok(within(usage.hour, delivered, 0.01), `hour rollups ${usage.hour} B, client got ${delivered} B`);
      assert.equal(usage.day, usage.hour);
      const lines = readFileSync(jsonl, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Row);
      const inFile = lines.filter((l) => l.id === rec.id);
      assert.equal(inFile.length, 1, 'one line for the connection in the file');
      assert.equal(inFile[0]!.result, 'shutdown');
      assert.equal(inFile[0]!.bytesDown, rec.bytesDown);
      const meter = await usedBytes(d.ports.admin, 'erin');
      assert.ok(within(meter, delivered, 0.01), `meter ${meter} B, client got ${delivered} B`);
      process.stderr.write(`SIGTERM cut: client ${delivered} B, record ${rec.bytesDown} B, rollups ${usage.hour} B, meter ${meter} B\n`);
    } finally {
      await d.stop();
    }
  });

  test('SIGKILL during a download: the last checkpoint is on disk; records and meter within one interval', async () => {
    const INTERVAL = 250;
    const dir = tempDir();
    const file = join(dir, 'rotor.yaml');
    writeConfigFile(file, configFor(dir, { checkpointMs: INTERVAL }, { flushIntervalMs: INTERVAL }));
    let d: ChildDaemon = await spawnDaemon(file, join(dir, 'rotor.log'));
    const dl = await started(d, () => download(d.ports.socks5, 'erin', 'erin-pw', target.port, `/bytes/${TOTAL}?rate=${RATE}`));
    d.signal('SIGKILL');
    await d.exited;
    await dl.closed;
    const delivered = dl.received();
    // One interval's bytes at the download's rate, plus the time a write takes on a loaded machine.
    const slack = (RATE * (INTERVAL + 500)) / 1000;

    d = await spawnDaemon(file, join(dir, 'rotor2.log'));
    try {
      const rows = await adminGet<{ items: Row[] }>(d.ports.admin, '/v1/connections?user=erin&limit=10');
      assert.equal(rows.items.length, 1, JSON.stringify(rows.items));
      const rec = rows.items[0]!;
      // The daemon that ran it died without a stop: the next start says so (its bytes as last checkpointed).
      assert.equal(rec.result, 'lost', JSON.stringify(rec));
      assert.match(rec.reason ?? '', /without a stop/);
      assert.ok(rec.bytesDown > 0 && rec.bytesDown <= delivered * 1.01, `record ${rec.bytesDown} B, client got ${delivered} B`);
      assert.ok(delivered - rec.bytesDown <= slack, `record ${rec.bytesDown} B, client got ${delivered} B: more than one interval lost`);
      const usage = await usageDown(d.ports.admin, 'erin');
      assert.equal(usage.hour, rec.bytesDown, 'the rollups hold what the record holds');
      const meter = await usedBytes(d.ports.admin, 'erin');
      assert.ok(delivered - meter <= slack && meter <= delivered * 1.01, `meter ${meter} B, client got ${delivered} B`);
      assert.ok(Math.abs(meter - (rec.bytesUp + rec.bytesDown)) <= slack, `meter ${meter} B, record ${rec.bytesUp + rec.bytesDown} B`);
      process.stderr.write(
        `SIGKILL: client ${delivered} B, record ${rec.bytesDown} B (${rec.result}), meter ${meter} B, interval ${INTERVAL} ms at ${RATE} B/s\n`,
      );
    } finally {
      await d.stop();
    }
  });
});
