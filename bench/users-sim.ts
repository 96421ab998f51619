// The sandbox platform in a process of its own for bench/users.ts's `--platform process` mode: the same
// simulator the daemon embeds, on the same state file (the sub accounts an import made), so the daemon's RSS
// and CPU are the daemon's alone, as they are beside a real platform. Prints one JSON line
// ({pid, baseUrl, appKey, appSecret}) once it answers, then runs until SIGTERM.
//
//   node --import tsx bench/users-sim.ts '{"stateFile": "...", "latencyMs": 0, "drawnLines": {...}}'
import { startSimulator } from '../src/sim/index.ts';

const options = JSON.parse(process.argv[2] ?? '{}') as { stateFile: string; latencyMs?: number; drawnLines?: Record<string, string[]> };
const sim = await startSimulator({
  stateFile: options.stateFile,
  ...(options.latencyMs !== undefined ? { latencyMs: options.latencyMs } : {}),
  ...(options.drawnLines ? { drawnLines: options.drawnLines } : {}),
});
process.stdout.write(`${JSON.stringify({ pid: process.pid, baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret })}\n`);
await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
await sim.close();
