// One gateway under a V8 flag set behind the bench's squid, microsocks and target, for the tools that read what V8
// logs per operation (bench/ic.ts, bench/jit.ts): the minimal gateway, or a build as `npm start` runs it.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchConfig, npmStartCommand, spawnRotor } from './daemon.ts';
import { startJsonChild, startMicrosocks, startSquid, type Proc } from './procs.ts';
import { runLoad } from './rate-tunnels.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));

export interface CaseGateway {
  gateway: Proc & { http: number; socks5: number };
  /** `kind`'s load (M1, connect or socks5) through the gateway for `seconds`: operations completed. */
  load(kind: string, seconds: number): Promise<number>;
  /** Stops the gateway, squid, microsocks and the target. */
  stop(): Promise<void>;
}

/** `root`: a build directory (bin/, dist/, package.json), default this checkout; `minimal`: the minimal gateway. */
export async function startCaseGateway(o: { minimal: boolean; root?: string; nodeFlags: string[] }): Promise<CaseGateway> {
  const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
  const socks = await startMicrosocks('bench', 'unused');
  const squid = await startSquid();
  let gateway: Proc & { http: number; socks5: number };
  let user: string;
  if (o.minimal) {
    const spec = {
      user: SOCKS_USER,
      password: BENCH_PASSWORD,
      http: { port: squid.port },
      socks5: { port: socks.port, username: socks.username, password: socks.password },
    };
    const { info, proc } = await startJsonChild<{ http: number; socks5: number; pid: number }>(process.execPath, [
      ...o.nodeFlags,
      '--import',
      'tsx',
      join(HERE, 'minimal.ts'),
      JSON.stringify(spec),
    ]);
    gateway = { ...proc, http: info.http, socks5: info.socks5 };
    user = SOCKS_USER;
  } else {
    const root = o.root === undefined ? undefined : resolve(o.root);
    const start = npmStartCommand(root);
    gateway = await spawnRotor(
      (d) => benchConfig(squid, socks, join(d, 'rotor.db')),
      [...start.nodeFlags, ...o.nodeFlags],
      60_000,
      start.env,
      root === undefined ? {} : { root },
    );
    user = HTTP_USER;
  }
  return {
    gateway,
    load: (kind, seconds) => runLoad({ kind, gateway, user, targetPort: target.info.port, seconds }),
    stop: async () => {
      await gateway.stop();
      await squid.stop();
      await socks.stop();
      await target.proc.stop();
    },
  };
}

/** The CSV fields of a V8 log line (names may be quoted and hold commas). */
export function v8LogFields(line: string): string[] {
  if (!line.includes('"')) return line.split(',');
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (const ch of line) {
    if (ch === '"') quoted = !quoted;
    else if (ch === ',' && !quoted) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out;
}

/**
 * startCaseGateway with V8 writing `logFlags` (e.g. --log-ic) to one log file in a fresh directory: the
 * gateway, its load for `kind`, the log's path and its directory (the caller removes it).
 */
export async function startLoggedGateway(o: {
  minimal: boolean;
  root: string | undefined;
  kind: string;
  logFlags: string[];
  dirPrefix: string;
}): Promise<{
  gateway: CaseGateway['gateway'];
  load: (seconds: number) => Promise<number>;
  stop: () => Promise<void>;
  logFile: string;
  dir: string;
}> {
  const dir = mkdtempSync(join(tmpdir(), o.dirPrefix));
  const logFile = join(dir, 'v8.log');
  const g = await startCaseGateway({
    minimal: o.minimal,
    ...(o.root !== undefined ? { root: o.root } : {}),
    nodeFlags: [...o.logFlags, `--logfile=${logFile}`, '--no-logfile-per-isolate'],
  });
  return { gateway: g.gateway, load: (seconds) => g.load(o.kind, seconds), stop: g.stop, logFile, dir };
}
