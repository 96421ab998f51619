// `rotor call <Operation> [--params JSON|@FILE]`: one platform call with the config's platform settings.
// In embedded mode the platform is the sandbox inside the running daemon: the call goes through that daemon's
// admin API (src/cli/daemon-call.ts); with no daemon answering there, a throwaway sandbox is started for the
// one call (its state is not the daemon's), and stderr says so. Prints the decrypted answer exactly as the
// platform sent it (null when it sent no data).
import { readFileSync } from 'node:fs';
import type { Config } from '../config/schema.ts';
import { PlatformClient } from '../platform/client.ts';
import { isOperationName, OPERATION_NAMES } from '../platform/operations.ts';
import type { Logger } from '../telemetry/logger.ts';
import { callThroughDaemon } from './daemon-call.ts';
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

export async function runCall(
  args: { operation: string; params: string | undefined },
  config: Config,
  logger: Logger,
  out: (text: string) => void,
  note: (text: string) => void = (text) => process.stderr.write(text),
): Promise<void> {
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
      const via = await callThroughDaemon(config.admin, args.operation, params, p.timeoutMs);
      if (via.reached) {
        out(`${JSON.stringify(via.data, null, 2)}\n`);
        return;
      }
      note(
        `rotor call: ${via.why}; the call went to a throwaway embedded sandbox (not a running daemon's platform: its orders and accounts are not there)\n`,
      );
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
