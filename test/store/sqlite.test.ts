import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openStore, SqliteStore, migrate, MIGRATIONS, StoreError } from '../../src/store/index.ts';
import { order } from './contract.ts';

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'rotor-store-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('SqliteStore on a file', () => {
  test('creates the parent folder, uses WAL and records migrations once', async () => {
    const path = join(dir, 'nested', 'a.db');
    const s = new SqliteStore(path);
    assert.equal(existsSync(path), true);
    assert.equal(s.journalMode(), 'wal');
    assert.deepEqual(
      s.appliedMigrations(),
      MIGRATIONS.map((m) => m.id),
    );
    await s.close();
    const again = new SqliteStore(path);
    assert.deepEqual(
      again.appliedMigrations(),
      MIGRATIONS.map((m) => m.id),
    );
    await again.close();
    // Running the migrations by hand again applies nothing.
    const db = new Database(path);
    assert.deepEqual(migrate(db), []);
    const count = db.prepare('SELECT COUNT(*) AS n FROM migrations').get() as { n: number };
    assert.equal(count.n, MIGRATIONS.length);
    db.close();
  });

  test('a later migration is applied on reopen, earlier ones are not re-run', async () => {
    const path = join(dir, 'mig.db');
    const s1 = new SqliteStore(path);
    await s1.kvSet('k', 1);
    await s1.close();
    const extra = [...MIGRATIONS, { id: 999, name: 'test column', sql: 'ALTER TABLE kv ADD COLUMN note TEXT' }];
    const s2 = new SqliteStore(path, { migrations: extra });
    assert.deepEqual(s2.appliedMigrations(), [...MIGRATIONS.map((m) => m.id), 999]);
    assert.equal(await s2.kvGet('k'), 1);
    await s2.close();
    const s3 = new SqliteStore(path, { migrations: extra });
    assert.deepEqual(s3.appliedMigrations(), [...MIGRATIONS.map((m) => m.id), 999]);
    await s3.close();
  });
});

// The semantics every driver shares live in contract.ts (run for SQLite by contract-sqlite.test.ts); what
// follows is only what the SQLite driver and openStore have of their own.
describe('SqliteStore specifics', () => {
  test('in memory: data is held for the life of the handle', async () => {
    const s = openStore(':memory:');
    await s.putOrder(order('RM2', { status: 3 }));
    await s.putOrder(order('RM1'));
    assert.equal((await s.getOrder('RM1'))?.appOrderNo, 'RM1');
    assert.deepEqual(
      (await s.countOrders()).sort((a, b) => a.status - b.status),
      [
        { type: 1, status: 1, count: 1 },
        { type: 1, status: 3, count: 1 },
      ],
    );
    await s.close();
  });

  test('redis URLs and unopenable paths fail with stable codes', async () => {
    assert.throws(
      () => openStore('redis://127.0.0.1:6379'),
      (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNSUPPORTED',
    );
    assert.throws(
      () => openStore(join(dir, 'not-a-dir-file.db', 'x.db').replace('not-a-dir-file.db', '\0bad')),
      (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNAVAILABLE',
    );
  });
});
