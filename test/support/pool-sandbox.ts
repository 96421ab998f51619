// The setting the pool tests draw in: the real sandbox platform (orders complete after 20 ms) reached through
// the real client, main account `shop1` with sub account `alice`, and a loopback echo target (`echo:<bytes>`)
// to carry bytes through drawn nodes. Each test file opens the orders it needs on top.
import { createServer, type AddressInfo } from 'node:net';
import { startSimulator, type Simulator } from '../../src/sim/index.ts';
import { PlatformClient } from '../../src/platform/client.ts';

export interface PoolSandbox {
  sim: Simulator;
  client: PlatformClient;
  /** the echo target's port on 127.0.0.1 */
  targetPort: number;
  close(): Promise<void>;
}

export async function startPoolSandbox(): Promise<PoolSandbox> {
  const target = createServer((s) => s.on('data', (b) => s.end(`echo:${b.toString()}`)).on('error', () => undefined));
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  const sim = await startSimulator({ orderDelayMs: 20 });
  const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0, timeoutMs: 5000 });
  await client.call('CreateUser', { appUsername: 'shop1', status: 1 });
  await client.call('CreateProxyUser', { appUsername: 'alice', appMainUsername: 'shop1', limitFlow: 100, status: 1 });
  return {
    sim,
    client,
    targetPort: (target.address() as AddressInfo).port,
    close: async () => {
      client.close();
      await sim.close();
      await new Promise<void>((resolve) => target.close(() => resolve()));
    },
  };
}
