// The platform the daemon talks to: the in-process sandbox in embedded mode, else the configured one.
import type { Config } from '../config/schema.ts';
import { PlatformClient, platformEndpoint } from '../platform/client.ts';
import type { Simulator } from '../sim/index.ts';
import type { AssemblyContext } from './lifecycle.ts';

export interface SandboxOptions {
  orderDelayMs?: number;
  clockSpeed?: number;
  /** how many password-gateway ports (upstream "nodes") the sandbox opens; default 4 */
  gatewayPorts?: number;
}

export interface PlatformPart {
  client: PlatformClient;
  sim: Simulator | undefined;
  /** The platform actually used (the sandbox's address and keys in embedded mode). */
  platform: Config['platform'];
}

export async function assemblePlatform(config: Config, sandbox: SandboxOptions | undefined, ctx: AssemblyContext): Promise<PlatformPart> {
  let sim: Simulator | undefined;
  let platform = config.platform;
  if (config.platform.mode === 'embedded') {
    const { startSimulator, sandboxStateFile } = await import('../sim/index.ts');
    // The sandbox keeps its accounts, orders and draws in a file beside the store, across restarts.
    const stateFile = sandboxStateFile(config.store.path);
    sim = await startSimulator({
      ...(sandbox?.orderDelayMs !== undefined ? { orderDelayMs: sandbox.orderDelayMs } : {}),
      ...(sandbox?.clockSpeed !== undefined ? { clock: { speed: sandbox.clockSpeed } } : {}),
      ...(sandbox?.gatewayPorts !== undefined ? { gatewayPorts: sandbox.gatewayPorts } : {}),
      ...(Object.keys(config.platform.sandbox.drawnLines).length > 0 ? { drawnLines: config.platform.sandbox.drawnLines } : {}),
      backconnect: config.platform.sandbox.backconnect,
      latencyMs: config.platform.sandbox.latencyMs,
      ...(stateFile ? { stateFile } : {}),
    });
    const started = sim;
    ctx.stops.onStop('sandbox', () => started.close());
    platform = { ...config.platform, baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret };
    ctx.logger.info({ baseUrl: sim.baseUrl }, 'embedded sandbox platform started');
  }
  const client = new PlatformClient({
    ...platformEndpoint(platform),
    timeoutMs: platform.timeoutMs,
    retries: platform.retries,
    backoff: platform.backoff,
    logger: ctx.logger.child({ component: 'platform' }),
    metrics: ctx.metrics,
  });
  ctx.stops.onStop('platform client', () => client.close());
  return { client, sim, platform };
}
