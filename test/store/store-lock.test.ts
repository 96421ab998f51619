// The store's lock is the file's, not the name's: a store.path through a symlink (to the file or to its directory)
// is the same store, so a second holder is refused; the lock comes back once released.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lockStore } from '../../src/store/store-lock.ts';

const dir = mkdtempSync(join(tmpdir(), 'rotor-lock-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a symlink to the store file or to its directory names the same lock', () => {
  mkdirSync(join(dir, 'data'));
  const real = join(dir, 'data', 'rotor.db');
  writeFileSync(real, '');
  symlinkSync(real, join(dir, 'current.db'));
  symlinkSync(join(dir, 'data'), join(dir, 'linked'));
  const held = lockStore(real, 'test');
  assert.ok(held);
  try {
    for (const other of [join(dir, 'current.db'), join(dir, 'linked', 'rotor.db'), join(dir, 'data', '..', 'data', 'rotor.db')]) {
      assert.throws(
        () => lockStore(other, 'test'),
        (err: Error & { code?: string }) => err.code === 'STORE_IN_USE',
        other,
      );
    }
  } finally {
    held.release();
  }
  const again = lockStore(join(dir, 'current.db'), 'test');
  assert.ok(again, 'released, the store can be taken again');
  again.release();
});

test('a store not made yet in a linked directory is locked by its real directory', () => {
  const held = lockStore(join(dir, 'data', 'new.db'), 'test');
  try {
    assert.throws(
      () => lockStore(join(dir, 'linked', 'new.db'), 'test'),
      (err: Error & { code?: string }) => err.code === 'STORE_IN_USE',
    );
  } finally {
    held?.release();
  }
});

test('in-memory and Redis stores take no lock', () => {
  assert.equal(lockStore(':memory:', 'test'), undefined);
  assert.equal(lockStore('redis://127.0.0.1:6379/0', 'test'), undefined);
});
