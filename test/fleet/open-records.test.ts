// Open connection records in a fleet: two `rotor start` children on one real redis-server, each relaying a
// slow SOCKS5 download whose record is checkpointed `open`. While both run, neither's record is settled (each
// renews its lease); once one daemon is SIGKILLed, the other settles its record `lost` within a few lease
// lives, its bytes those of the last checkpoint, and leaves its own running connection's record `open`.
import { after, before, describe, test } from 'node:test';
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
} from '../e2e/limits-harness.ts';
import { redisMissing, RedisServer } from './redis-server.ts';

const KIB = 1024;
const RATE = 64 * KIB;
const LEASE_MS = 1500;
const PREFIX = `openrec${process.pid}:`;

interface Row {
  id: string;
  user: string;
  bytesDown: number;
  result: string;
  reason: string | null;
}

/** A paced download through `port` (SOCKS5) that runs until the socket is destroyed. */
function download(port: number, user: string, target: BytesTarget): Promise<{ socket: Socket; received: () => number }> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    let received = 0;
    s.once('error', reject);
    s.once('connect', () => {
      socks5Connect(s, { host: '127.0.0.1', port: target.port }, { username: user, password: `${user}-pw` }, (err, head) => {
        if (err) return reject(err);
        received += head?.length ?? 0;
        s.on('data', (c: Buffer) => {
          received += c.length;
        });
        s.on('error', () => undefined);
        s.resume();
        s.write(`GET /bytes/${256 * 1024 * KIB}?rate=${RATE} HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\n\r\n`);
        resolve({ socket: s, received: () => received });
      });
    });
  });
}

describe('open connection records in a fleet', { skip: redisMissing }, () => {
  const redis = new RedisServer();
  let target: BytesTarget;
  const daemons: ChildDaemon[] = [];
  const sockets: Socket[] = [];

  before(async () => {
    await redis.start();
    target = await startTarget();
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await Promise.allSettled(daemons.map((d) => d.stop()));
    await target?.close();
    await redis.stop();
    cleanup();
  });

  const spawn = async (name: string): Promise<ChildDaemon> => {
    const dir = tempDir('rotor-openrec-');
    const file = join(dir, `${name}.yaml`);
    const users = ['erin', 'frank'].map((u) => ({ name: u, password: `${u}-pw`, mainAccount: 'shop1' }));
    const raw = rawConfig(dir, users, {
      store: { store: { path: redis.url }, fleet: { prefix: PREFIX, instanceId: `daemon-${name}`, aliveTtlMs: LEASE_MS } },
    }) as Record<string, unknown>;
    writeConfigFile(file, { ...raw, log: { level: 'info', access: { flushIntervalMs: 200, checkpointMs: 200 } } });
    const d = await spawnDaemon(file, join(dir, `${name}.log`));
    daemons.push(d);
    return d;
  };

  test("a SIGKILLed daemon's open record becomes lost with its bytes; a live peer's stays open", async () => {
    const a = await spawn('a');
    const b = await spawn('b');
    const viaA = await download(a.ports.socks5, 'erin', target);
    const viaB = await download(b.ports.socks5, 'frank', target);
    sockets.push(viaA.socket, viaB.socket);

    const records = async (): Promise<Map<string, Row>> => {
      const rows = await adminGet<{ items: Row[] }>(b.ports.admin, '/v1/connections?limit=20');
      return new Map(rows.items.map((r) => [r.user, r]));
    };
    const open = (r: Row | undefined, min: number): boolean => r?.result === 'open' && r.bytesDown >= min;
    await waitFor(
      'both records checkpointed open',
      async () => {
        const m = await records();
        return open(m.get('erin'), 1) && open(m.get('frank'), 1);
      },
      20_000,
    );

    // Both alive through three lease lives (each one's record checkpointed with that much more): nothing settled.
    const first = (await records()).get('erin')!.bytesDown;
    await waitFor(
      'three lease lives of checkpoints',
      async () => {
        const m = await records();
        assert.ok(
          open(m.get('erin'), 0) && open(m.get('frank'), 0),
          `a live daemon's record was settled: ${JSON.stringify([...m.values()])}`,
        );
        return m.get('erin')!.bytesDown >= first + (3 * LEASE_MS * RATE) / 1000;
      },
      30_000,
    );

    a.signal('SIGKILL');
    await a.exited;
    const lastCheckpoint = (await records()).get('erin')!.bytesDown;
    const settled = await waitFor(
      "the killed daemon's record settled by its peer",
      async () => {
        const m = await records();
        return m.get('erin')?.result === 'lost' ? m : undefined;
      },
      8 * LEASE_MS + 10_000,
    );
    const erin = settled.get('erin')!;
    assert.match(erin.reason ?? '', /without a stop/);
    assert.ok(
      erin.bytesDown >= lastCheckpoint && erin.bytesDown <= viaA.received(),
      `record ${erin.bytesDown} B, client got ${viaA.received()} B`,
    );
    const frank = settled.get('frank')!;
    assert.equal(frank.result, 'open', JSON.stringify(frank));
    // And it goes on being checkpointed by its live daemon.
    await waitFor(
      'the live record checkpointed again',
      async () => {
        const f = (await records()).get('frank');
        return f?.result === 'open' && f.bytesDown > frank.bytesDown;
      },
      10_000,
    );
    assert.equal((await records()).get('erin')?.result, 'lost');
  });
});
