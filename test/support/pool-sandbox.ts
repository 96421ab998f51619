// The setting the pool tests draw in: the real sandbox platform (orders complete after 20 ms) reached through
// the real client, main account `shop1` with sub account `alice`, and a loopback echo target (`echo:<bytes>`)
// to carry bytes through drawn nodes. Each test file opens the orders it needs on top.
import { createServer, type AddressInfo } from 'node:net';
import { SocksClient } from 'socks';
import type { UpstreamNode } from '../../src/pool/types.ts';
import { startSimulator, type Simulator } from '../../src/sim/index.ts';
import { PlatformClient } from '../../src/platform/client.ts';

export interface PoolSandbox {
  sim: Simulator;
  client: PlatformClient;
  /** the echo target's port on 127.0.0.1 */
  targetPort: number;
  /**
   * Sends `ping` to the echo target through a drawn SOCKS5 node (the `socks` package: a client independent
   * of Rotor's own) and resolves with the whole answer, `echo:ping` when the node's credentials work.
   */
  echoThrough(node: UpstreamNode): Promise<string>;
  close(): Promise<void>;
}

async function echoThrough(node: UpstreamNode, targetPort: number): Promise<string> {
  if (node.protocol !== 'socks5') throw new Error(`echoThrough: ${node.id} is ${node.protocol}, not socks5`);
  const { socket } = await SocksClient.createConnection({
    proxy: {
      host: node.host,
      port: node.port,
      type: 5,
      ...(node.username ? { userId: node.username, password: node.password ?? '' } : {}),
    },
    command: 'connect',
    destination: { host: '127.0.0.1', port: targetPort },
    timeout: 3000,
  });
  try {
    const reply = new Promise<string>((resolve, reject) => {
      let got = '';
      socket.on('data', (b: Buffer) => (got += b.toString()));
      socket.once('end', () => resolve(got));
      socket.once('error', reject);
    });
    socket.write('ping');
    return await reply;
  } finally {
    socket.destroy();
  }
}

export async function startPoolSandbox(): Promise<PoolSandbox> {
  const target = createServer((s) => s.on('data', (b) => s.end(`echo:${b.toString()}`)).on('error', () => undefined));
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  const sim = await startSimulator({ orderDelayMs: 20 });
  const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0, timeoutMs: 5000 });
  await client.call('CreateUser', { appUsername: 'shop1', status: 1 });
  await client.call('CreateProxyUser', { appUsername: 'alice', appMainUsername: 'shop1', limitFlow: 100, status: 1 });
  const targetPort = (target.address() as AddressInfo).port;
  return {
    sim,
    client,
    targetPort,
    echoThrough: (node) => echoThrough(node, targetPort),
    close: async () => {
      client.close();
      await sim.close();
      await new Promise<void>((resolve) => target.close(() => resolve()));
    },
  };
}
