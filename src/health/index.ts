// Upstream health as the composition root wires it: probes over the gateway's own dialers, fed by the
// pool registry, with the gateway's recent target as the probe target when no URL is configured.
import type { UpstreamNode } from '../pool/types.ts';
import { dialHttpConnect, dialSocks5 } from '../proxy/upstream-dial.ts';
import type { Target } from '../proxy/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { probeNode } from './probe.ts';
import { Prober, type ProbeablePool } from './prober.ts';

export { HedgeDelays, HandshakeTimes } from '../proxy/handshake-times.ts';
export { Prober, type ProbeablePool } from './prober.ts';
export { probeNode, type ProbeResult } from './probe.ts';

export interface HealthOptions {
  pools: () => Iterable<ProbeablePool>;
  /** pool.healthCheck */
  healthCheck: { url: string; intervalMs: number };
  connectTimeoutMs: number;
  handshakeTimeoutMs: number;
  recentTarget?: () => Target | undefined;
  metrics?: Metrics;
  logger?: Logger;
  now?: () => number;
  tickMs?: number;
  /** The longest time between two passes of the prober (src/health/prober.ts lookMs). */
  lookMs?: number;
}

export function startHealthProbes(o: HealthOptions): Prober {
  const url = o.healthCheck.url ? new URL(o.healthCheck.url) : undefined;
  const dial = (node: UpstreamNode, target: Target, options: Parameters<typeof dialSocks5>[2]) =>
    node.protocol === 'socks5' ? dialSocks5(node, target, options) : dialHttpConnect(node, target, options);
  const prober = new Prober({
    pools: o.pools,
    probe: (node) =>
      probeNode(node, {
        dial,
        connectTimeoutMs: o.connectTimeoutMs,
        handshakeTimeoutMs: o.handshakeTimeoutMs,
        ...(url ? { url } : {}),
        ...(o.recentTarget ? { fallbackTarget: o.recentTarget } : {}),
      }),
    idleIntervalMs: o.healthCheck.intervalMs,
    ...(o.tickMs !== undefined ? { tickMs: o.tickMs } : {}),
    ...(o.lookMs !== undefined ? { lookMs: o.lookMs } : {}),
    ...(o.metrics ? { metrics: o.metrics } : {}),
    ...(o.logger ? { logger: o.logger } : {}),
    ...(o.now ? { now: o.now } : {}),
  });
  prober.start();
  return prober;
}
