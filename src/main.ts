// The composition root: wires the components from a validated Config and runs until a signal.
// Placeholder until the daemon is wired; `rotor start` reports it as such.
import type { Config } from './config/schema.ts';

export class DaemonNotWiredError extends Error {
  readonly code = 'NOT_WIRED';
  constructor() {
    super('the daemon is not wired yet (src/main.ts runDaemon)');
    this.name = 'DaemonNotWiredError';
  }
}

export async function runDaemon(_config: Config): Promise<void> {
  throw new DaemonNotWiredError();
}
