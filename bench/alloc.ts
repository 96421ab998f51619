// Allocation per plain-HTTP request (M1's load), or per new tunnel (--case connect|socks5: M2's load): the daemon (`rotor start` as `npm start` runs it) or the
// minimal gateway behind the same squid and target, wrk for a warm-up second and then `--seconds`, V8's
// sampling heap profiler running over the measured part through the inspector, objects collected since
// counted too. Prints KB allocated per request and the functions that allocate most (bytes per request).
// Allocation is what the scavenger pays for; it is steadier than CPU time on a shared machine.
//
//   node --import tsx bench/alloc.ts [--minimal] [--case M1|connect|socks5] [--seconds 3] [--top 30] [--callers NAME] [--root DIR] [--survivors]
//
// --survivors: only what outlived a scavenge (copied or promoted; objects still young when sampling stops count
// too, a young generation's worth at most), by allocating function.
//
// --callers NAME: also the call paths (4 frames up) into the functions whose printed name contains NAME, by
// bytes (e.g. `--callers 'Map :'` for which code grows Maps).
import { once } from 'node:events';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { benchConfig, npmStartCommand, spawnRotor } from './daemon.ts';
import { startJsonChild, startMicrosocks, startSquid, type Proc } from './procs.ts';
import { runLoad } from './rate-tunnels.ts';
import { BENCH_PASSWORD, HTTP_USER, SOCKS_USER } from './spec.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const { values } = parseArgs({
  options: {
    minimal: { type: 'boolean', default: false },
    seconds: { type: 'string', default: '3' },
    top: { type: 'string', default: '30' },
    case: { type: 'string', default: 'M1' },
    callers: { type: 'string' },
    // Only the sampled objects that outlived a scavenge (the profiler leaves out those a scavenge collected): what
    // the scavenger copies or promotes, by allocating function.
    survivors: { type: 'boolean', default: false },
    // Another build to measure (a directory holding bin/ and dist/, as bench/ab.ts takes); default this checkout.
    root: { type: 'string' },
  },
});
const kind = values.case.toLowerCase();
if (kind !== 'm1' && kind !== 'connect' && kind !== 'socks5') throw new Error('--case is M1, connect or socks5');

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

/** The inspector's WebSocket address of a process started with --inspect=127.0.0.1:PORT. */
async function inspectorUrl(port: number): Promise<string> {
  const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{ webSocketDebuggerUrl: string }>;
  return list[0]!.webSocketDebuggerUrl;
}

const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, ['--import', 'tsx', join(HERE, 'target.ts')]);
const socks = await startMicrosocks('bench', 'unused');
const squid = await startSquid();
let gateway: Proc & { http: number; socks5: number };
let user: string;
let url: string;
if (values.minimal) {
  const spec = {
    user: SOCKS_USER,
    password: BENCH_PASSWORD,
    http: { port: squid.port },
    socks5: { port: socks.port, username: socks.username, password: socks.password },
  };
  // A free port for the inspector: the gateway prints only its own ports.
  const port = 20_000 + Math.floor(Math.random() * 30_000);
  const { info, proc } = await startJsonChild<{ http: number; socks5: number; pid: number }>(process.execPath, [
    `--inspect=127.0.0.1:${port}`,
    '--import',
    'tsx',
    join(HERE, 'minimal.ts'),
    JSON.stringify(spec),
  ]);
  gateway = { ...proc, http: info.http, socks5: info.socks5 };
  user = SOCKS_USER;
  url = await inspectorUrl(port);
} else {
  // As `npm start` runs the build (its own package.json's node options and environment).
  const root = values.root === undefined ? undefined : resolve(values.root);
  const start = npmStartCommand(root);
  const d = await spawnRotor(
    (dir) => benchConfig(squid, socks, join(dir, 'rotor.db')),
    [...start.nodeFlags, '--inspect=127.0.0.1:0'],
    60_000,
    start.env,
    root === undefined ? {} : { root },
  );
  gateway = d;
  user = HTTP_USER;
  url = /ws:\/\/\S+/.exec(d.output())![0];
}

const ws = new WebSocket(url);
await once(ws, 'open');
let nextId = 0;
const waiting = new Map<number, (result: unknown) => void>();
ws.on('message', (data: Buffer) => {
  const msg = JSON.parse(data.toString('utf8')) as { id?: number; result?: unknown };
  if (msg.id !== undefined) waiting.get(msg.id)?.(msg.result);
});
const call = <T>(method: string, params: Record<string, unknown> = {}): Promise<T> =>
  new Promise((resolve) => {
    const id = ++nextId;
    waiting.set(id, resolve as (result: unknown) => void);
    ws.send(JSON.stringify({ id, method, params }));
  });

/** The case's load through the gateway for `seconds`: operations completed. */
const load = (seconds: number): Promise<number> => runLoad({ kind, gateway, user, targetPort: target.info.port, seconds });

try {
  await load(1);
  await call('HeapProfiler.enable');
  await call('HeapProfiler.startSampling', {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: !values.survivors,
  });
  const ops = await load(Number(values.seconds));
  const per = kind === 'm1' ? 'request' : 'tunnel';
  const { profile } = await call<{ profile: { head: ProfileNode } }>('HeapProfiler.stopSampling');
  const byFunction = new Map<string, number>();
  let total = 0;
  const paths = new Map<string, number>();
  const walk = (n: ProfileNode, stack: string[]): void => {
    const f = n.callFrame;
    const name = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(dist|node_modules|bench)\//, '$1/')}:${f.lineNumber + 1}`;
    total += n.selfSize;
    byFunction.set(name, (byFunction.get(name) ?? 0) + n.selfSize);
    if (values.callers !== undefined && n.selfSize > 0 && name.includes(values.callers)) {
      const path = [name, ...stack.slice(-4).reverse()].join(' <- ');
      paths.set(path, (paths.get(path) ?? 0) + n.selfSize);
    }
    stack.push(name);
    for (const c of n.children) walk(c, stack);
    stack.pop();
  };
  walk(profile.head, []);
  process.stdout.write(
    `${values.minimal ? 'minimal gateway' : 'rotor start'}: ${ops} ${per}s (${kind}), ${(total / ops / 1024).toFixed(1)} KB ${values.survivors ? 'surviving a scavenge' : 'allocated'} per ${per}\n`,
  );
  for (const [name, bytes] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    process.stdout.write(`${(bytes / ops).toFixed(0).padStart(7)} B/${per}  ${name}\n`);
  }
  if (paths.size > 0) process.stdout.write(`-- call paths into "${values.callers}"\n`);
  for (const [path, bytes] of [...paths].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    process.stdout.write(`${(bytes / ops).toFixed(0).padStart(7)} B/${per}  ${path}\n`);
  }
} finally {
  ws.close();
  await gateway.stop();
  await squid.stop();
  await socks.stop();
  await target.proc.stop();
}
