import { PlatformClient } from '../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS } from '../src/sim/index.ts';
import { ProductCatalog } from '../src/accounting/products.ts';
import { SubAccounts } from '../src/users/sub-account.ts';
const sim = await startSimulator({ orderDelayMs: 50 });
const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
await client.call('CreateUser', { appUsername: 'shop1', status: 1 });
const subs = new SubAccounts(client, new ProductCatalog({ client }));
const N = 2000;
let next = 0;
const t = Date.now();
const worker = async () => {
  while (next < N) {
    const i = next++;
    await subs.ensure({
      name: `s${i}`,
      mainAccount: 'shop1',
      product: SIM_PRODUCTS.dynamicTraffic,
      quota: { bytes: 1e9, period: 'total' },
    });
  }
};
await Promise.all(Array.from({ length: Number(process.argv[2] ?? 16) }, worker));
console.log(N, 'ensure in', Date.now() - t, 'ms', process.cpuUsage());
client.close();
await sim.close();
