// A users directory on a real sandbox over HTTP: the platform client, the sub accounts and the accounting the
// daemon wires (src/daemon/users.ts), on a store the test chooses, with the sweep and the flush left to the test.
import { Accounting } from '../../src/accounting/accounting.ts';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { PlatformClient, type PlatformClientOptions } from '../../src/platform/client.ts';
import type { Simulator } from '../../src/sim/index.ts';
import type { SqliteStore } from '../../src/store/sqlite.ts';
import { Users, type UsersOptions } from '../../src/users/directory.ts';
import { SubAccounts } from '../../src/users/sub-account.ts';

/** A platform client of the sandbox (close it with the test). */
export function sandboxClient(sim: Simulator, options: Partial<PlatformClientOptions> = {}): PlatformClient {
  return new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, ...options });
}

export interface SandboxUsers {
  users: Users;
  accounting: Accounting;
  /** Closes the directory, then the accounting, then the store (the daemon's stop order). */
  close(): Promise<void>;
}

/** The directory started on `store` (nothing of its own yet swept: sweepMs an hour unless given). */
export async function startSandboxUsers(
  client: PlatformClient,
  store: SqliteStore,
  options: Partial<UsersOptions> = {},
): Promise<SandboxUsers> {
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
  const users = new Users({
    store,
    accounting,
    platform: new SubAccounts(client, new ProductCatalog({ client })),
    sweepMs: 3_600_000,
    ...options,
  });
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
