// Warm upstream connections (src/proxy/warm.ts) as the gateway's dialers use them: pool.warm's settings, the
// dial timeouts, products listed in pool.warm.off left out (products sold by IP count are left out by their
// pools' tuning, src/daemon/pools.ts).
import type { Config } from '../config/schema.ts';
import { WarmConnections } from '../proxy/warm.ts';
import type { AssemblyContext } from './lifecycle.ts';

export function warmConnections(config: Config, ctx: AssemblyContext): WarmConnections {
  const { perNode, maxPerPool, idleMs, off } = config.pool.warm;
  const warm = new WarmConnections({
    perNode,
    maxPerPool,
    idleMs,
    metrics: ctx.metrics,
    connectTimeoutMs: config.proxy.connectTimeoutMs,
    handshakeTimeoutMs: config.proxy.upstreamHandshakeTimeoutMs ?? config.proxy.connectTimeoutMs,
    offProducts: new Set(off),
  });
  ctx.stops.onStop('warm upstream connections', () => warm.close());
  return warm;
}
