// The connection log's table keeps as few b-trees per record as its queries allow (migration 60): no index of
// the id alone (a connection is found by its start and id), and the result indexes hold failures only. A store
// made by the former schema is rebuilt on open with every record, and the queries GET /v1/connections makes
// each read an index in the newest-first order (no full scan, no sort).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteConnectionLog } from '../../src/store/sqlite-connection-log.ts';
import { MIGRATIONS } from '../../src/store/migrations.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { ConnectionRecord } from '../../src/store/connection-log-types.ts';
import { captureLogger } from '../support/logger.ts';

const T0 = Date.UTC(2026, 0, 10, 12, 0, 0);

function record(i: number, over: Partial<ConnectionRecord> = {}): ConnectionRecord {
  return {
    id: `m${i.toString(36)}`,
    user: i % 2 === 0 ? 'ann' : 'bob',
    session: null,
    listener: 'http',
    target: `site-${i % 7}.example:443`,
    node: 'socks5://sub@127.0.0.1:9000',
    bytesUp: 10,
    bytesDown: 100,
    startedAt: T0 + i * 10,
    durationMs: 5,
    result: i % 5 === 0 ? 'upstream_error' : 'ok',
    reason: 'closed',
    retries: 0,
    hedges: 0,
    ...over,
  };
}

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'rotor-connlog-schema-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

const indexes = (store: SqliteStore): { name: string; unique: number; partial: number }[] =>
  store.database().prepare(`SELECT name, "unique", partial FROM pragma_index_list('connections') ORDER BY name`).all() as {
    name: string;
    unique: number;
    partial: number;
  }[];

test('a store of the former schema is rebuilt with every record, and a checkpoint is still replaced by its end', async () => {
  const path = join(dir, 'old.db');
  const old = new SqliteStore(path, { migrations: MIGRATIONS.filter((m) => m.id < 60) });
  const before = Array.from({ length: 300 }, (_, i) => record(i));
  const open = record(1000, { result: 'open', reason: 'open at the last checkpoint', bytesDown: 7 });
  // Rows as the former store wrote them (its INSERT named the id alone as the conflict target).
  const insert = old.database().prepare(
    `INSERT INTO connections (id, user, session, listener, target, node, bytes_up, bytes_down, started_at, duration_ms, result, reason, retries, hedges)
       VALUES (@id, @user, @session, @listener, @target, @node, @bytesUp, @bytesDown, @startedAt, @durationMs, @result, @reason, @retries, @hedges)
       ON CONFLICT (id) DO NOTHING`,
  );
  for (const r of [...before, open]) insert.run(r);
  const rowids = old.database().prepare('SELECT rowid, id FROM connections ORDER BY rowid').all();
  assert.ok(
    indexes(old).some((i) => i.name.startsWith('sqlite_autoindex_connections')),
    'the former schema: an index of the id',
  );
  await old.close();

  const { logger, text } = captureLogger('info');
  const store = new SqliteStore(path, { logger });
  assert.ok(store.appliedMigrations().includes(60));
  // The rebuild holds the start (seconds at a million records): the log says which migration ran and how long.
  const lines = text()
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { migration?: number; ms?: number; msg: string })
    // Later migrations (70: the batch ids) run after it.
    .filter((l) => l.migration === 60);
  assert.deepEqual(
    lines.map((l) => [l.msg, l.migration]),
    [
      ['store migration: applying', 60],
      ['store migration: applied', 60],
    ],
  );
  assert.equal(typeof lines[1]!.ms, 'number');
  // The former table's pages went back to the file system at the start, not in the first retention pass.
  assert.equal(Number(store.database().pragma('freelist_count', { simple: true })), 0, 'no free pages left after the rebuild');
  assert.deepEqual(
    store.database().prepare('SELECT rowid, id FROM connections ORDER BY rowid').all(),
    rowids,
    'every record, its rowid kept',
  );
  assert.deepEqual(indexes(store), [
    { name: 'connections_result', unique: 0, partial: 1 },
    { name: 'connections_started', unique: 1, partial: 0 },
    { name: 'connections_user', unique: 0, partial: 0 },
    { name: 'connections_user_result', unique: 0, partial: 1 },
  ]);
  const log = store.connectionLog();
  assert.equal((await log.footprint()).records, 301);
  // The connection's end replaces its checkpoint; a record written again stays out; new ones go in.
  await log.append([record(1000, { result: 'ok', bytesDown: 900 }), record(5, { reason: 'written again' }), record(2001), record(2002)]);
  const rows = await log.query({ limit: 1000 });
  assert.equal(rows.length, 303);
  assert.equal((await log.footprint()).records, 303);
  const end = rows.find((r) => r.id === open.id)!;
  assert.equal(end.result, 'ok');
  assert.equal(end.bytesDown, 900);
  assert.equal(rows.find((r) => r.id === record(5).id)!.reason, 'closed');
  assert.deepEqual(
    (await log.query({ result: 'upstream_error', limit: 1000 })).map((r) => r.id),
    before
      .filter((r) => r.result === 'upstream_error')
      .reverse()
      .map((r) => r.id),
  );
  await store.close();
});

test('each query of GET /v1/connections reads an index newest first: no scan of the table, no sort', async () => {
  const store = new SqliteStore(join(dir, 'plans.db'));
  const db = store.database();
  // The statement the store runs for a query, caught as it is prepared.
  const seen: string[] = [];
  const prepare = db.prepare.bind(db);
  db.prepare = ((sql: string) => {
    seen.push(sql);
    return prepare(sql);
  }) as typeof db.prepare;
  const log = new SqliteConnectionLog(db);
  const plan = async (q: Parameters<SqliteConnectionLog['query']>[0]): Promise<string> => {
    seen.length = 0;
    await log.query(q);
    const args = [q.user, q.result, q.since, q.until].filter((v) => v !== undefined);
    const rows = prepare(`EXPLAIN QUERY PLAN ${seen[0]!}`).all(...args, q.limit) as { detail: string }[];
    return rows.map((r) => r.detail).join('; ');
  };
  const cases: [Parameters<SqliteConnectionLog['query']>[0], RegExp][] = [
    [{ limit: 100 }, /connections_started/],
    [{ user: 'ann', limit: 100 }, /connections_user\b/],
    [{ result: 'upstream_error', limit: 100 }, /connections_result/],
    [{ user: 'ann', result: 'limited', limit: 100 }, /connections_user_result/],
    [{ result: 'ok', limit: 100 }, /connections_started/],
    [{ user: 'ann', result: 'ok', limit: 100 }, /connections_user\b/],
    [{ since: T0, until: T0 + 1000, limit: 100 }, /connections_started/],
  ];
  for (const [q, index] of cases) {
    const p = await plan(q);
    assert.match(p, index, `${JSON.stringify(q)}: ${p}`);
    assert.doesNotMatch(p, /TEMP B-TREE|SCAN connections$|SCAN connections;/, `${JSON.stringify(q)}: ${p}`);
  }
  db.prepare = prepare;
  const settle = prepare(`EXPLAIN QUERY PLAN UPDATE connections SET result = 'lost' WHERE result = 'open' AND result <> 'ok'`).all() as {
    detail: string;
  }[];
  assert.match(settle.map((r) => r.detail).join('; '), /connections_(user_)?result/, 'settling open records reads the failures index');
  await store.close();
});

test('a record the table cannot hold is skipped, the rest of its batch is stored and counted', async () => {
  const store = new SqliteStore(join(dir, 'skip.db'));
  const log = store.connectionLog();
  // 50 records: two 25-row statements, then 5 one at a time; one malformed record in each part.
  const batch = Array.from({ length: 55 }, (_, i) => record(5000 + i));
  for (const at of [3, 30, 52]) batch[at] = { ...batch[at]!, listener: null as unknown as string };
  assert.equal(await log.append(batch), 3, 'the records left out are counted for the caller to report');
  const rows = await log.query({ limit: 1000 });
  assert.equal(rows.length, 52);
  assert.equal((await log.footprint()).records, 52);
  assert.ok(!rows.some((r) => [3, 30, 52].some((at) => r.id === batch[at]!.id)));
  await store.close();
});
