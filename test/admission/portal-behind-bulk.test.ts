// A customer signing in to the portal while a batch import with chosen passwords is hashing (POST /v1/users/batch,
// `rotor users import`: one scrypt per row at the queue's bulk priority, two threads) waits for about one hash, not
// for the whole import: the portal's checks and the bulk hashes take turns. Real scrypt on the process's queue, as
// the daemon uses it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hashPasswordAsync } from '../../src/admission/password.ts';
import { checkPassword } from '../../src/portal/credentials.ts';

test("a portal sign-in during a bulk import is not held behind the import's every hash", async () => {
  const stored = await hashPasswordAsync('right-password', { priority: 'admin' });
  // A batch import of 40 rows with chosen passwords (users/bulk.ts hashForBulk: priority 'bulk').
  const rows = 40;
  let bulkDone = 0;
  const imports = Array.from({ length: rows }, (_, i) =>
    hashPasswordAsync(`row-${i}`, { priority: 'bulk' }).then(() => {
      bulkDone++;
    }),
  );
  const t0 = performance.now();
  const ok = await checkPassword('right-password', stored);
  const waited = performance.now() - t0;
  const doneWhenSignedIn = bulkDone;
  await Promise.all(imports);
  assert.equal(ok, true);
  // Taking turns: it waits for the hashes running and at most one more (with the portal after every bulk hash, 40).
  assert.ok(
    doneWhenSignedIn <= 4,
    `the customer's sign-in waited ${Math.round(waited)} ms, until ${doneWhenSignedIn} of the import's ${rows} hashes were done (2 hashing threads)`,
  );
});
