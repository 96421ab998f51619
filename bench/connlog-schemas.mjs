// The connection log's table layouts side by side, SQLite alone (better-sqlite3, the store's pragmas, 25 rows per
// INSERT, tunnel-shaped `ok` rows): `--prefill` rows first, then CPU per row of `--records` more, in batches of
// 500; with `--bound` each batch also deletes as many of the oldest (a log at its maxRecords). Variants:
//   V0  id TEXT PRIMARY KEY, four indexes (migrations 30-55)
//   V1  no PRIMARY KEY, UNIQUE (started_at, id) in place of the time index
//   V2  WITHOUT ROWID, PRIMARY KEY (started_at, id), three indexes
//   V3  V1 with the two result indexes for failures only (WHERE result <> 'ok'): migration 60
//   V4  V2 with the two result indexes for failures only
//   V5  V0 with the two result indexes for failures only
// Env CACHE, MMAP, ACP, TEMPSTORE: cache_size, mmap_size, wal_autocheckpoint, temp_store; IGNORE=1: INSERT OR IGNORE
// in place of ON CONFLICT DO NOTHING.
//
//   node bench/connlog-schemas.mjs V3 [--prefill 200000] [--records 50000] [--bound]
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    prefill: { type: 'string', default: '200000' },
    records: { type: 'string', default: '50000' },
    bound: { type: 'boolean', default: false },
  },
});
const variant = positionals[0] ?? 'V3';
const COLS = `id TEXT NOT NULL, user TEXT, session TEXT, listener TEXT NOT NULL, target TEXT, node TEXT, exit TEXT,
 bytes_up INTEGER NOT NULL, bytes_down INTEGER NOT NULL, started_at INTEGER NOT NULL, duration_ms INTEGER NOT NULL,
 result TEXT NOT NULL, reason TEXT, retries INTEGER NOT NULL DEFAULT 0, hedges INTEGER NOT NULL DEFAULT 0, rule TEXT, client TEXT, count INTEGER`;
const P = "WHERE result <> 'ok'";
const V = {
  V0: [
    `CREATE TABLE connections (${COLS.replace('id TEXT NOT NULL', 'id TEXT PRIMARY KEY NOT NULL')});
   CREATE INDEX s ON connections (started_at, id); CREATE INDEX u ON connections (user, started_at, id);
   CREATE INDEX r ON connections (result, started_at, id); CREATE INDEX ur ON connections (user, result, started_at, id);`,
    '(id)',
    true,
  ],
  V1: [
    `CREATE TABLE connections (${COLS});
   CREATE UNIQUE INDEX s ON connections (started_at, id); CREATE INDEX u ON connections (user, started_at, id);
   CREATE INDEX r ON connections (result, started_at, id); CREATE INDEX ur ON connections (user, result, started_at, id);`,
    '(started_at, id)',
    true,
  ],
  V2: [
    `CREATE TABLE connections (${COLS}, PRIMARY KEY (started_at, id)) WITHOUT ROWID;
   CREATE INDEX u ON connections (user, started_at, id);
   CREATE INDEX r ON connections (result, started_at, id); CREATE INDEX ur ON connections (user, result, started_at, id);`,
    '(started_at, id)',
    false,
  ],
  V3: [
    `CREATE TABLE connections (${COLS});
   CREATE UNIQUE INDEX s ON connections (started_at, id); CREATE INDEX u ON connections (user, started_at, id);
   CREATE INDEX r ON connections (result, started_at, id) ${P}; CREATE INDEX ur ON connections (user, result, started_at, id) ${P};`,
    '(started_at, id)',
    true,
  ],
  V4: [
    `CREATE TABLE connections (${COLS}, PRIMARY KEY (started_at, id)) WITHOUT ROWID;
   CREATE INDEX u ON connections (user, started_at, id);
   CREATE INDEX r ON connections (result, started_at, id) ${P}; CREATE INDEX ur ON connections (user, result, started_at, id) ${P};`,
    '(started_at, id)',
    false,
  ],
  V5: [
    `CREATE TABLE connections (${COLS.replace('id TEXT NOT NULL', 'id TEXT PRIMARY KEY NOT NULL')});
   CREATE INDEX s ON connections (started_at, id); CREATE INDEX u ON connections (user, started_at, id);
   CREATE INDEX r ON connections (result, started_at, id) ${P}; CREATE INDEX ur ON connections (user, result, started_at, id) ${P};`,
    '(id)',
    true,
  ],
};
const [ddl, conflict, rowid] = V[variant];
const dir = mkdtempSync(join(tmpdir(), 'rotor-connlog-schemas-'));
const db = new Database(join(dir, 'x.db'));
db.pragma('auto_vacuum = INCREMENTAL');
db.pragma('journal_mode = WAL');
db.pragma('journal_size_limit = 4194304');
db.pragma('synchronous = NORMAL');
if (process.env.CACHE) db.pragma('cache_size = ' + process.env.CACHE);
if (process.env.TEMPSTORE) db.pragma('temp_store = ' + process.env.TEMPSTORE);
if (process.env.MMAP) db.pragma('mmap_size = ' + process.env.MMAP);
if (process.env.ACP) db.pragma('wal_autocheckpoint = ' + process.env.ACP);
db.exec(ddl);
const N = 18,
  R = 25;
const row = `(${new Array(N).fill('?').join(',')})`;
const names =
  'id, user, session, listener, target, node, exit, bytes_up, bytes_down, started_at, duration_ms, result, reason, retries, hedges, rule, client, count';
const many = db.prepare(
  process.env.IGNORE
    ? `INSERT OR IGNORE INTO connections (${names}) VALUES ${new Array(R).fill(row).join(',')}`
    : `INSERT INTO connections (${names}) VALUES ${new Array(R).fill(row).join(',')} ON CONFLICT ${conflict} DO NOTHING`,
);
const del = db.prepare(
  rowid
    ? `DELETE FROM connections WHERE rowid IN (SELECT rowid FROM connections ORDER BY started_at, id LIMIT ?) RETURNING length(id) AS size`
    : `DELETE FROM connections WHERE (started_at, id) IN (SELECT started_at, id FROM connections ORDER BY started_at, id LIMIT ?) RETURNING length(id) AS size`,
);
let seq = 0,
  at = Date.now() - 86400000;
const prefix = 'Ab3_x9Qz';
const vals = new Array(N * R);
const tx = db.transaction((n, bound) => {
  for (let k = 0; k < n; k += R) {
    for (let j = 0; j < R; j++) {
      const s = ++seq & 1,
        o = j * N;
      vals[o] = prefix + seq.toString(36);
      vals[o + 1] = s ? 'bs' : 'bh';
      vals[o + 2] = null;
      vals[o + 3] = s ? 'socks5' : 'http';
      vals[o + 4] = '127.0.0.1:41234';
      vals[o + 5] = s ? 'socks5://up@127.0.0.1:41001' : 'http://up@127.0.0.1:41002';
      vals[o + 6] = null;
      vals[o + 7] = 120;
      vals[o + 8] = 2048;
      vals[o + 9] = at++;
      vals[o + 10] = 1;
      vals[o + 11] = 'ok';
      vals[o + 12] = 'closed';
      vals[o + 13] = 0;
      vals[o + 14] = 0;
      vals[o + 15] = null;
      vals[o + 16] = '127.0.0.1';
      vals[o + 17] = null;
    }
    many.run(vals);
  }
  if (bound) del.all(n);
});
for (let i = 0; i < Number(values.prefill); i += 500) tx(500, false);
const t = process.cpuUsage();
for (let i = 0; i < Number(values.records); i += 500) tx(500, values.bound);
const u = process.cpuUsage(t);
const n = Number(values.records);
console.log(
  `${variant}${values.bound ? ' at the bound' : ''}: ${((u.user + u.system) / n).toFixed(2)} µs per row (user ${(u.user / n).toFixed(2)}, system ${(u.system / n).toFixed(2)}), ${db.pragma('page_count', { simple: true })} pages`,
);
db.close();
rmSync(dir, { recursive: true, force: true });
