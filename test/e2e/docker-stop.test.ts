// The shipped image (Dockerfile) under `docker stop`: SIGTERM, then SIGKILL once the grace (docker's default
// --time 10 s; Compose's stop_grace_period, Kubernetes' terminationGracePeriodSeconds) is over. A tunnel still open
// at the stop (a long download, a kept websocket) makes the drain last all of proxy.drainMs; a grace shorter than
// drainMs plus the stop's last writes lands the SIGKILL during the drain. Two things keep the bill whole:
// - the default drain (5 s) leaves docker's default grace 5 s for the cut's `shutdown` records and the last
//   flushes, so a plain `docker stop` is a graceful stop;
// - from the stop's start open connections are checkpointed at once and about every second of the drain, so a
//   SIGKILL during a longer drain costs about a second of their bytes (the next start settles the `open`
//   record `lost`, its bytes those of the last checkpoint); before, with checkpointMs' default (60 s), a tunnel
//   younger than a minute left no record and no bytes at all.
// `rotor start` as a child process with config/default.yaml's log.access (checkpoint 60 s, flush 1 s), a real
// SOCKS5 download paced at 1 MiB/s, the connection log and the usage rollups read after a restart.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
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
} from './limits-harness.ts';

const MIB = 1024 * 1024;
const HOUR = 3_600_000;
let target: BytesTarget;
before(async () => {
  target = await startTarget();
});
after(async () => {
  await target?.close();
  cleanup();
});

/** A SOCKS5 download paced at 1 MiB/s through the daemon, as `user`; its bytes counted as they arrive. */
async function download(d: ChildDaemon, user: string): Promise<{ socket: Socket; received: () => number }> {
  let received = 0;
  const s: Socket = connect({ host: '127.0.0.1', port: d.ports.socks5 });
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.once('connect', () =>
      socks5Connect(s, { host: '127.0.0.1', port: target.port }, { username: user, password: `${user}-pw` }, (err) => {
        if (err) return reject(err);
        s.on('data', (c: Buffer) => (received += c.length));
        s.resume();
        s.write(`GET /bytes/${512 * MIB}?rate=${MIB} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
        resolve();
      }),
    );
  });
  s.on('error', () => undefined);
  return { socket: s, received: () => received };
}

interface Billed {
  records: { result: string; bytesDown: number }[];
  /** the user's hour rollups, bytes down */
  rollups: number;
}

async function billed(d: ChildDaemon, user: string): Promise<Billed> {
  const rows = await adminGet<{ items: { result: string; bytesDown: number }[] }>(d.ports.admin, `/v1/connections?user=${user}&limit=10`);
  const from = new Date(Date.now() - 2 * HOUR).toISOString();
  const to = new Date(Date.now() + HOUR).toISOString();
  const usage = await adminGet<{ bytesDown: number }[] | { items: { bytesDown: number }[] }>(
    d.ports.admin,
    `/v1/usage?user=${user}&granularity=hour&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`,
  );
  const usageRows = Array.isArray(usage) ? usage : usage.items;
  return { records: rows.items, rollups: usageRows.reduce((n, r) => n + r.bytesDown, 0) };
}

test('docker stop (SIGTERM, SIGKILL 10 s later) with the default drainMs: a graceful stop, the open download billed in full as `shutdown`', async (t) => {
  const dir = tempDir();
  const file = join(dir, 'rotor.yaml');
  // drainMs and log.access as config/default.yaml leaves them.
  writeConfigFile(file, rawConfig(dir, [{ name: 'dora', password: 'dora-pw', mainAccount: 'shop1' }]));
  const d = await spawnDaemon(file, join(dir, 'rotor.log'));
  const dl = await download(d, 'dora');
  await waitFor('2 MiB delivered', () => dl.received() >= 2 * MIB, 20_000);
  const termAt = Date.now();
  d.signal('SIGTERM');
  const killer = setTimeout(() => d.signal('SIGKILL'), 10_000); // docker stop's default grace
  const exit = await d.exited;
  const stoppedIn = Date.now() - termAt;
  clearTimeout(killer);
  const delivered = dl.received();

  const d2 = await spawnDaemon(file, join(dir, 'rotor2.log'));
  try {
    const b = await billed(d2, 'dora');
    const story =
      `exit ${JSON.stringify(exit)} ${stoppedIn} ms after the SIGTERM: the client received ${delivered} B, ` +
      `the connection log holds ${JSON.stringify(b)}`;
    t.diagnostic(story);
    assert.equal(exit.code, 0, story);
    assert.deepEqual(
      b.records.map((r) => r.result),
      ['shutdown'],
      story,
    );
    assert.ok(b.records[0]!.bytesDown >= delivered, story);
    assert.equal(b.rollups, b.records[0]!.bytesDown, story);
  } finally {
    await d2.stop();
    dl.socket.destroy();
  }
});

test('a SIGKILL during a drain longer than the grace costs about a second of the open download, settled `lost` at the next start', async (t) => {
  const dir = tempDir();
  const file = join(dir, 'rotor.yaml');
  const raw = rawConfig(dir, [{ name: 'kim', password: 'kim-pw', mainAccount: 'shop1' }]) as Record<string, unknown> & {
    proxy: Record<string, unknown>;
  };
  raw.proxy.drainMs = 60_000;
  writeConfigFile(file, raw);
  const d = await spawnDaemon(file, join(dir, 'rotor.log'));
  const dl = await download(d, 'kim');
  await waitFor('2 MiB delivered', () => dl.received() >= 2 * MIB, 20_000);
  const atStop = dl.received();
  d.signal('SIGTERM');
  // The drain goes on (the download with it) until a grace shorter than the drain is over.
  await waitFor('4 MiB more delivered during the drain', () => dl.received() >= atStop + 4 * MIB, 30_000);
  d.signal('SIGKILL');
  const exit = await d.exited;
  const delivered = dl.received();
  dl.socket.destroy();

  const d2 = await spawnDaemon(file, join(dir, 'rotor2.log'));
  try {
    const b = await billed(d2, 'kim');
    const held = b.records[0]?.bytesDown ?? 0;
    const story =
      `exit ${JSON.stringify(exit)}: the client received ${delivered} B (${atStop} B at the SIGTERM), ` +
      `the connection log holds ${JSON.stringify(b)}`;
    t.diagnostic(story);
    assert.equal(exit.signal, 'SIGKILL', story);
    assert.deepEqual(
      b.records.map((r) => r.result),
      ['lost'],
      story,
    );
    // Checkpointed about every second of the drain: at most ~2.5 s of the 1 MiB/s download missing (one
    // interval, the write, a loaded machine's late timer), not the drain's 4 MiB.
    assert.ok(held >= delivered - 2.5 * MIB, `${story}: ${delivered - held} B missing`);
    assert.equal(b.rollups, held, `${story}: the rollups bill what the record holds`);
  } finally {
    await d2.stop();
  }
});
