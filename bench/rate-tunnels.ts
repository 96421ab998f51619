// The load the measuring tools (bench/alloc.ts, bench/ic.ts, bench/counts.ts) put on a gateway: M2's rate job (a
// forked bench/client.ts opens tunnels, 32 at a time) or M1's wrk run (50 kept-alive connections).
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClientJob, ClientReply, RateResult } from './client.ts';
import { BENCH_PASSWORD, SOCKS_USER } from './spec.ts';
import { runWrk } from './wrk.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));

export interface RateTunnels {
  kind: 'connect' | 'socks5';
  gateway: { http: number; socks5: number };
  /** the HTTP listener's user (the SOCKS5 listener's is SOCKS_USER) */
  user: string;
  targetPort: number;
  seconds: number;
}

/** Tunnels completed through the gateway in `seconds`. */
export async function rateTunnels(o: RateTunnels): Promise<number> {
  const client = fork(join(HERE, 'client.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  await once(client, 'message');
  const proxy =
    o.kind === 'connect'
      ? { kind: 'connect' as const, port: o.gateway.http, username: o.user, password: BENCH_PASSWORD }
      : { kind: 'socks5' as const, port: o.gateway.socks5, username: SOCKS_USER, password: BENCH_PASSWORD };
  const job: ClientJob = { op: 'rate', proxy, target: o.targetPort, concurrency: 32, durationMs: o.seconds * 1000 };
  client.send(job);
  const [m] = (await once(client, 'message')) as [ClientReply];
  client.disconnect();
  if (!m.ok) throw new Error(m.error);
  return (m.result as RateResult).completed;
}

/** Operations through the gateway in `seconds`: M1's requests for 'm1', else M2's tunnels of that kind. */
export async function runLoad(o: Omit<RateTunnels, 'kind'> & { kind: string }): Promise<number> {
  if (o.kind !== 'm1') return rateTunnels({ ...o, kind: o.kind === 'connect' ? 'connect' : 'socks5' });
  const job = { proxyPort: o.gateway.http, targetPort: o.targetPort, username: o.user, password: BENCH_PASSWORD, connections: 50 };
  return (await runWrk({ ...job, durationSeconds: o.seconds })).requests;
}
