// The connection log in `rotor start` as a child process (the real CLI, its signal handling, a SQLite file):
// a SIGKILL loses at most the batch not yet written (measured: connections that ended more than one flush
// interval before the kill are all on disk); a graceful stop writes every record, logs each startup fact
// once and ends with "rotor stopped"; the JSON-lines file gets the same records.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { cleanup, curl, rawConfig, spawnDaemon, startTarget, tempDir, writeConfigFile, type BytesTarget } from '../e2e/limits-harness.ts';

/** curl through the child's SOCKS5 port (here, not from e2e/harness.ts: that module pulls in the store seam,
 * which would run this SQLite-file test a second time in the Redis pass). */
const viaSocks5h = (port: number, user: string, pass: string): string[] => ['-x', `socks5h://${user}:${pass}@127.0.0.1:${port}`];

const FLUSH_MS = 400;

function configFor(dir: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const raw = rawConfig(dir, [{ name: 'erin', password: 'erin-pw', mainAccount: 'shop1' }]) as Record<string, unknown>;
  return { ...raw, log: { level: 'info', access: { flushIntervalMs: FLUSH_MS, batchSize: 500, ...extra } } };
}

function storedRecords(file: string): { id: string; startedAt: number; durationMs: number }[] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT id, started_at AS startedAt, duration_ms AS durationMs FROM connections').all() as {
      id: string;
      startedAt: number;
      durationMs: number;
    }[];
  } finally {
    db.close();
  }
}

describe('rotor start: the connection log across a SIGKILL and a graceful stop', () => {
  let target: BytesTarget;
  before(async () => {
    target = await startTarget();
  });
  after(async () => {
    await target?.close();
    cleanup();
  });

  test('SIGKILL loses at most the last batch', async () => {
    const dir = tempDir();
    const file = join(dir, 'rotor.yaml');
    writeConfigFile(file, configFor(dir));
    const d = await spawnDaemon(file, join(dir, 'rotor.log'));
    const ended: number[] = [];
    try {
      // Connections one after another for about four flush intervals, then the kill right after the last.
      const until = Date.now() + 4 * FLUSH_MS;
      while (Date.now() < until || ended.length < 10) {
        const r = await curl([...viaSocks5h(d.ports.socks5, 'erin', 'erin-pw'), target.url(2000)]);
        assert.equal(r.code, 0, r.stderr);
        ended.push(Date.now());
      }
    } finally {
      d.signal('SIGKILL');
      await d.exited;
    }
    const killedAt = Date.now();
    const stored = storedRecords(join(dir, 'rotor.db'));
    const lost = ended.length - stored.length;
    // Everything that ended more than a flush interval (plus a write's time) before the kill is on disk.
    const settled = ended.filter((t) => t < killedAt - 2 * FLUSH_MS - 500).length;
    assert.ok(stored.length >= settled, `${stored.length} stored, ${settled} ended before the last interval`);
    assert.ok(lost >= 0 && lost <= 500, `lost ${lost} of ${ended.length}`);
    process.stderr.write(
      `connlog SIGKILL: ${ended.length} connections, ${stored.length} records on disk, ${lost} lost (flush ${FLUSH_MS} ms)\n`,
    );
  });

  test('graceful stop: every record written, each startup fact logged once, then "rotor stopped"', async () => {
    const dir = tempDir();
    const file = join(dir, 'rotor.yaml');
    const jsonl = join(dir, 'access', 'connections.jsonl');
    writeConfigFile(file, configFor(dir, { flushIntervalMs: 60_000, file: jsonl }));
    const d = await spawnDaemon(file, join(dir, 'rotor.log'));
    for (let i = 0; i < 5; i++) {
      const r = await curl([...viaSocks5h(d.ports.socks5, 'erin', 'erin-pw'), target.url(1000)]);
      assert.equal(r.code, 0, r.stderr);
    }
    await d.stop(15_000);
    const stored = storedRecords(join(dir, 'rotor.db'));
    assert.equal(stored.length, 5, 'the last flush at shutdown wrote every record');
    assert.ok(existsSync(jsonl));
    const lines = readFileSync(jsonl, 'utf8').trim().split('\n');
    assert.deepEqual(lines.map((l) => (JSON.parse(l) as { id: string }).id).sort(), stored.map((r) => r.id).sort());
    const msgs = d.lines().map((l) => String(l.msg ?? ''));
    assert.equal(msgs[msgs.length - 1], 'rotor stopped');
    const startup = msgs.slice(0, msgs.indexOf('rotor is ready') + 1);
    const repeated = startup.filter((m, i) => startup.indexOf(m) !== i);
    assert.deepEqual(repeated, [], 'no startup line twice');
    assert.ok(msgs.some((m) => m.startsWith('admin API listening at')));
  });
});
