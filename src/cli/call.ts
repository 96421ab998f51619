// `rotor call <Operation> [--params JSON|@FILE]`: one platform call with the config's platform settings; in
// embedded mode a simulator is started in-process for the call and stopped after. Prints the decrypted
// answer exactly as the platform sent it (null when it sent no data).
import { readFileSync } from 'node:fs';
import type { Config } from '../config/schema.ts';
import { PlatformClient } from '../platform/client.ts';
import { isOperationName, OPERATION_NAMES } from '../platform/operations.ts';
import type { Logger } from '../telemetry/logger.ts';
import { UsageError } from './exit.ts';
import { startSimulator, type SimulatorHandle } from './simulator.ts';

export function readParams(spec: string | undefined): unknown {
  if (spec === undefined) return {};
  let text = spec;
  if (spec.startsWith('@')) {
    const file = spec.slice(1);
    try {
      text = readFileSync(file === '-' ? 0 : file, 'utf8');
    } catch (err) {
      throw new UsageError(`--params: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new UsageError('--params: not valid JSON');
  }
}

export async function runCall(args: { operation: string; params: string | undefined }, config: Config, logger: Logger, out: (text: string) => void): Promise<void> {
  if (!isOperationName(args.operation)) {
    throw new UsageError(`unknown operation ${JSON.stringify(args.operation)}; one of: ${OPERATION_NAMES.join(', ')}`);
  }
  const params = readParams(args.params);
  const p = config.platform;
  let sim: SimulatorHandle | undefined;
  let client: PlatformClient | undefined;
  try {
    let target = { baseUrl: p.baseUrl, appKey: p.appKey, appSecret: p.appSecret };
    if (p.mode === 'embedded') {
      sim = await startSimulator({ host: '127.0.0.1', port: 0 });
      target = { baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret };
    }
    client = new PlatformClient({
      ...target,
      version: p.version,
      encrypt: p.encrypt,
      timeoutMs: p.timeoutMs,
      retries: p.retries,
      backoff: p.backoff,
      logger,
    });
    const answer = await client.callRaw(args.operation, params);
    out(`${JSON.stringify(answer, null, 2)}\n`);
  } finally {
    client?.close();
    await sim?.close();
  }
}
