// Fleet: a name deleted and made again on one daemon between two looks of another. The other daemon sees the new
// record in one look (the tombstone is older than it, so the delete itself is skipped): it must still end the
// deleted customer's connections it runs (as the delete would have), before they count on the new customer, and
// move its meter to the new customer's own usage key. Two users directories on one store (SQLite file, and Redis
// on the suite's Redis pass), a real sandbox over HTTP; each look is called by the test.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Accounting } from '../../src/accounting/accounting.ts';
import { ProductCatalog } from '../../src/accounting/products.ts';
import type { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS } from '../../src/sim/index.ts';
import { Users } from '../../src/users/directory.ts';
import { createUserSchema } from '../../src/users/record.ts';
import { SubAccounts } from '../../src/users/sub-account.ts';
import { sandboxClient } from '../support/sandbox-users.ts';
import { openTestStore } from '../support/store.ts';

const dir = mkdtempSync(join(tmpdir(), 'rotor-name-reuse-follow-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function daemon(path: string, client: PlatformClient) {
  const store = await openTestStore(path);
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
  const users = new Users({ store, accounting, platform: new SubAccounts(client, new ProductCatalog({ client })), sweepMs: 3_600_000 });
  await accounting.start([]);
  await users.start([]);
  return {
    users,
    accounting,
    async close() {
      await users.close();
      await accounting.close();
      await store.close();
    },
  };
}

test("deleted and made again between two looks of another daemon: it ends the deleted customer's connections and starts the new one at 0", async () => {
  const sim = await startSimulator({ latencyMs: 0, upstreams: false });
  const client = sandboxClient(sim, { retries: 2 });
  const path = join(dir, 'follow.db');
  const a = await daemon(path, client);
  const b = await daemon(path, client);
  try {
    const user = { name: 'again1', mainAccount: 'shop1', product: SIM_PRODUCTS.dynamicTraffic };
    await a.users.create(createUserSchema.parse({ ...user, password: 'first-customer-1' }));
    await b.users.follow();
    assert.equal(b.users.view('again1')?.state, 'ready');
    // B serves the first customer: a running connection, and bytes on its meter.
    let stopped = 0;
    b.users.limiter('again1')!.attach({ stop: () => void stopped++ });
    b.accounting.meter('again1').add(0, 5000);
    assert.equal(b.users.view('again1')?.usedBytes, 5000);

    // On A, between two looks of B: deleted, and made again for another customer.
    await a.users.remove('again1');
    await a.users.create(createUserSchema.parse({ ...user, password: 'second-customer-2' }));
    await b.users.follow();
    assert.equal(stopped, 1, "B kept running the deleted customer's connection under the new customer's name");
    assert.equal(b.users.view('again1')?.usedBytes, 0, 'B counts the new customer from 0');
    assert.equal(b.users.historySince('again1'), Date.parse(a.users.view('again1')!.createdAt));
    b.accounting.meter('again1').add(0, 70);
    assert.equal(b.users.view('again1')?.usedBytes, 70);
  } finally {
    await b.close();
    await a.close();
    client.close();
    await sim.close();
  }
});
