// A batch row whose sub account the platform did not answer for (code 500 still answered after the retries:
// the intent is kept and the next sweep makes the user) with a password made up by Rotor: the answer must not
// say "failed" with no password, for the user does come to be, with a password nobody was given, and a client
// that sends the row again is told the user exists. A single creation (POST /v1/users) likewise answers 503
// PLATFORM_UNREACHABLE with the password the user is finished with. Against a real sandbox over HTTP and a real SQLite file.
import { after, test } from 'node:test';
import { sandboxClient, startSandboxUsers } from '../support/sandbox-users.ts';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toErrorReply } from '../../src/admin/errors.ts';
import { startSimulator, SIM_PRODUCTS } from '../../src/sim/index.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { createBatch } from '../../src/users/bulk.ts';
import { createUserSchema } from '../../src/users/record.ts';

const dir = mkdtempSync(join(tmpdir(), 'rotor-batch-unknown-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a row answered code 500 past the retries, its password made up: the user made later is one the client can use', async () => {
  const sim = await startSimulator({ latencyMs: 0, upstreams: false });
  const client = sandboxClient(sim, { retries: 1, backoff: { baseMs: 5, maxMs: 10 } });
  const { users, close } = await startSandboxUsers(client, new SqliteStore(join(dir, 'users.db')));
  try {
    // The main account first, so that the row's only platform step is its sub account's creation.
    await client.call('CreateUser', { appUsername: 'shop1', status: 1 });
    sim.faults.set({ fail: { count: Infinity, operation: 'CreateProxyUser' } });
    const answer = await createBatch(users, [{ name: 'later1', mainAccount: 'shop1', product: SIM_PRODUCTS.dynamicTraffic }], {
      concurrency: 4,
    });
    sim.faults.set({ fail: null });
    await users.resume(); // the next sweep
    assert.equal(users.view('later1')?.state, 'ready', 'the user was made after all');
    const failed = answer.errors.find((e) => e.name === 'later1');
    assert.ok(
      failed === undefined || answer.passwords.later1 !== undefined,
      `the row answered ${failed?.code}: "${failed?.message}" without its password, yet the user was made`,
    );
    assert.equal(failed?.code, 'PLATFORM_UNREACHABLE');
    assert.match(failed?.message ?? '', /finished in the background/);

    // One user through POST /v1/users' path: answered as the platform unreachable, with the password it will have.
    sim.faults.set({ fail: { count: Infinity, operation: 'CreateProxyUser' } });
    const err = await users
      .create(createUserSchema.parse({ name: 'later2', mainAccount: 'shop1', product: SIM_PRODUCTS.dynamicTraffic }))
      .then(
        () => undefined,
        (e: unknown) => e as { code?: string; httpStatus?: number; generatedPassword?: string },
      );
    sim.faults.set({ fail: null });
    assert.equal(err?.code, 'PLATFORM_UNREACHABLE');
    assert.equal(err?.httpStatus, 503);
    assert.ok(typeof err?.generatedPassword === 'string', 'its generated password is given with the answer');
    const reply = toErrorReply(err);
    assert.equal(reply.status, 503);
    assert.equal(reply.body.error.code, 'PLATFORM_UNREACHABLE');
    assert.equal(reply.body.error.password, err?.generatedPassword, 'the admin API answers it');
    assert.ok(!JSON.stringify(err).includes(err?.generatedPassword ?? '?'), 'a logged error does not show it');
    assert.equal(users.view('later2')?.state, 'creating');
    await users.resume();
    assert.equal(users.view('later2')?.state, 'ready');
  } finally {
    await close();
    client.close();
    await sim.close();
  }
});
