// `rotor sim`: the sandbox platform alone. Prints one JSON line with its address and credentials when ready,
// then runs until SIGINT/SIGTERM.
import { startSimulator } from './simulator.ts';

type Plain = string | number | boolean;
const isPlain = (v: unknown): v is Plain => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/** The simulator's scalar facts (baseUrl, appKey, appSecret, host, port) and its upstream gateway ports. */
function readyLine(sim: Record<string, unknown>): string {
  const shown: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(sim)) if (isPlain(v)) shown[k] = v;
  const upstreams = sim.upstreams as { gatewayPorts?: unknown } | null | undefined;
  if (Array.isArray(upstreams?.gatewayPorts)) shown.gatewayPorts = upstreams.gatewayPorts.filter(isPlain);
  return JSON.stringify(shown);
}

export async function runSim(args: { host: string | undefined; port: number | undefined }, out: (text: string) => void): Promise<void> {
  const sim = await startSimulator({ host: args.host ?? '127.0.0.1', port: args.port ?? 0 });
  out(`${readyLine(sim)}\n`);
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await sim.close();
}
