// A batch's chosen passwords are hashed at the 'bulk' priority (src/admission/password.ts HashQueue): a single
// admin write's hash (POST /v1/users, a password change) queued behind a batch's is run before them, not after
// every one of them. Real scrypt on libuv's pool, one hash at a time.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { configureHashing, hashPasswordAsync } from '../../src/admission/password.ts';
import { hashForBulk } from '../../src/users/bulk.ts';

after(() => configureHashing({ concurrency: 2, maxQueued: 64 }));

test("an admin write's hash overtakes a batch's queued hashes", async () => {
  configureHashing({ concurrency: 1, maxQueued: 64 });
  const order: string[] = [];
  const bulk = Array.from({ length: 8 }, (_, i) => hashForBulk(`bulk-password-${i}`).then(() => order.push(`bulk${i}`)));
  const admin = hashPasswordAsync('admin-password').then(() => order.push('admin'));
  await Promise.all([...bulk, admin]);
  // The first bulk hash was already running; the admin one is next.
  assert.ok(order.indexOf('admin') <= 1, `done in this order: ${order.join(', ')}`);
});
