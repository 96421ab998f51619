// A sub account under a main account the platform does not have yet, against a real sandbox over HTTP: the
// creation answers 10061, the read finds no sub account, the main account is made, and the creation is sent
// again. When that second creation is done by the platform but its answer is lost (a reset, a timeout: the
// strain the sub accounts' window exists for), the client's retry (same reqId) is answered 10061, "the name
// exists": the sub account is there, made by this very creation. It must be taken as made, not as a refusal
// that removes the user (the user's intent deleted from the store, its sub account left on the platform).
import { after, before, test } from 'node:test';
import { sandboxClient, startSandboxUsers } from '../support/sandbox-users.ts';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { createUserSchema } from '../../src/users/record.ts';
import { SubAccounts } from '../../src/users/sub-account.ts';
import { poll } from '../support/wait.ts';

const quota = { bytes: -1, period: 'total' as const };
const dir = mkdtempSync(join(tmpdir(), 'rotor-retried-create-'));
let sim: Simulator;
let client: PlatformClient;
before(async () => {
  // Each call acts after its 100 ms: the drop is armed between the main account's creation and the retry.
  sim = await startSimulator({ latencyMs: 100, upstreams: false });
  client = sandboxClient(sim, { retries: 3, backoff: { baseMs: 10, maxMs: 50 } });
});
after(async () => {
  client?.close();
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

const subs = (main: string): string[] =>
  sim.inspect
    .accounts()
    .find((m) => m.appUsername === main)
    ?.subs.map((s) => s.appUsername) ?? [];

/** Once the main account is being made, the next CreateProxyUser (the second try) acts but loses its answer. */
async function dropTheSecondCreation(): Promise<void> {
  const made = (): number => sim.inspect.calls().CreateUser ?? 0;
  const before = made();
  await poll(() => made() > before, { what: 'the main account being made', timeoutMs: 10_000, everyMs: 2 });
  sim.faults.dropNext(1, 'CreateProxyUser');
}

test('the second creation done but its answer lost: the retry answered 10061 finds the sub account made', async () => {
  const accounts = new SubAccounts(client, new ProductCatalog({ client }));
  const making = accounts.ensure(
    { name: 'lostuser', mainAccount: 'lostmain', product: SIM_PRODUCTS.dynamicTraffic, quota },
    { fresh: true },
  );
  await dropTheSecondCreation();
  await making;
  assert.deepEqual(subs('lostmain').sort(), ['lostmain', 'lostuser']);
});

test('a creation through the directory: the user is made, not removed while its sub account stays', async () => {
  const store = new SqliteStore(join(dir, 'users.db'));
  const { users, close } = await startSandboxUsers(client, store);
  try {
    const creating = users.create(
      createUserSchema.parse({ name: 'lostuser2', mainAccount: 'lostmain2', product: SIM_PRODUCTS.dynamicTraffic, quota }),
    );
    await dropTheSecondCreation();
    const outcome = await creating.then(
      () => 'made',
      (err: unknown) => `failed: ${(err as Error).message}`,
    );
    assert.ok(subs('lostmain2').includes('lostuser2'), 'the platform holds the sub account');
    assert.equal(outcome, 'made');
    assert.equal(users.view('lostuser2')?.state, 'ready');
    assert.equal((await store.getUser('lostuser2'))?.state, 'ready');
  } finally {
    await close();
  }
});
