// The one place the CLI touches the simulator, loaded lazily so remote-mode commands never load it.
/** What the CLI needs from a running simulator (startSimulator in src/sim/index.ts returns at least this). */
export interface SimulatorHandle {
  baseUrl: string;
  appKey: string;
  appSecret: string;
  close(): Promise<void>;
}

export async function startSimulator(options: { host?: string; port?: number }): Promise<SimulatorHandle & Record<string, unknown>> {
  const sim = await import('../sim/index.ts');
  return sim.startSimulator(options);
}
