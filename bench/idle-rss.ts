// Idle memory of the daemon as users run it: `rotor start` on config/default.yaml (a temp copy with free
// ports and its own store) as `npm start` runs it (`<npm start's NAME=value settings> node <its node options>
// bin/rotor.js start`; --bare: without either), read from /proc/<pid>/status once it logged 'rotor is ready':
//   ready   right after the ready line;
//   idle    after it has idled --idle-s seconds;
//   warm    after a warm-up (plain HTTP, CONNECT and SOCKS5 requests through each configured user to a
//           loopback target) and another --idle-s seconds;
// and the CPU the daemon spent over that last idle window, ms per second (its timers, the collector's idle work).
// --settle-s N: the CPU window starts N seconds after the warm-up instead of at once, so it reads an idle
// daemon's steady cost (its timers) without what follows the warm-up (V8's memory reducer runs up to three
// full collections once allocation has slowed, the compiler finishes).
// Two modes: `embedded` (the default config: the sandbox platform and its upstream ports in the same process)
// and `remote` (`platform.mode: remote` against `rotor sim` in a process of its own, so the daemon's own
// figure is known; the sim's RSS is printed beside it).
//   npm run bench:idle-rss -- [--mode embedded,remote] [--idle-s 10] [--reps 1] [--bare] [--node-flag F]... [--env NAME=value]... [--root DIR]... [--settle-s 0] [--json FILE]
// --root DIR (repeatable): the build to run (a directory holding bin/, dist/ and package.json, as bench/ab.ts
// takes) instead of this checkout; with several, each repetition runs them in turn (A B A B ...) and each gets a
// row, so two builds are compared on the same machine load.
// The environment passes to the daemon; npm start's own settings (glibc's MALLOC_* variables) over it, and
// --env over those (to try other values).
// Builds dist/ first when it is older than src/ (rotor start runs the compiled JavaScript).
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { parse } from 'yaml';
import { runCurl } from '../test/support/curl.ts';
import { ensureBuilt, npmStartCommand, spawnRotor, type Daemon } from './daemon.ts';
import { BenchSetupError, cpuMs, startJsonChild, type Proc } from './procs.ts';
import { median } from './stats.ts';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
const MiB = 1024 * 1024;

type Mode = 'embedded' | 'remote';

/** Memory of a process from /proc/<pid>/status, MiB: VmRSS and its anonymous and file-backed parts. */
export interface RssSample {
  rss: number;
  anon: number;
  file: number;
}

export function readRss(pid: number): RssSample {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string): number => {
    const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, 'm').exec(status);
    if (!m) throw new BenchSetupError(`no ${field} for pid ${pid}`);
    return Number(m[1]) / 1024;
  };
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile') };
}

/** V8's heap as the daemon's own metrics report it (prom-client's default metrics), MiB. */
interface HeapSample {
  used: number;
  total: number;
  external: number;
}

async function readHeap(adminPort: number): Promise<HeapSample | undefined> {
  const res = await fetch(`http://127.0.0.1:${adminPort}/metrics`).catch(() => undefined);
  if (!res?.ok) return undefined;
  const text = await res.text();
  const value = (name: string): number => {
    const m = new RegExp(`^rotor_${name} (\\S+)$`, 'm').exec(text);
    return m ? Number(m[1]) / MiB : NaN;
  };
  return {
    used: value('nodejs_heap_size_used_bytes'),
    total: value('nodejs_heap_size_total_bytes'),
    external: value('nodejs_external_memory_bytes'),
  };
}

export interface IdleResult {
  mode: Mode;
  /** The build run (--root), when not this checkout. */
  root?: string;
  ready: RssSample;
  idle: RssSample;
  warm: RssSample;
  /** Heap after the idle and the warm samples (read after RSS: the scrape itself allocates). */
  heapIdle: HeapSample | undefined;
  heapWarm: HeapSample | undefined;
  /** CPU ms (all threads) per second of the idle window after the warm-up; NaN when the window was 0 s. */
  idleCpuMsPerS: number;
  /** Of a median over repetitions: each repetition's idleCpuMsPerS, in order. */
  idleCpuRuns?: number[];
  /** Warm-up requests that got their answer, of those made. */
  warmOk: number;
  warmTotal: number;
  /** remote mode: the sim process's RSS at the end. */
  simRss?: number;
}

/** config/default.yaml with free ports and the store in the daemon's temp dir; `platform` merged over it. */
function defaultConfig(dir: string, platform: Record<string, unknown>): Record<string, unknown> {
  type Listen = { port: number };
  const config = parse(readFileSync(join(ROOT, 'config', 'default.yaml'), 'utf8')) as Record<string, unknown> & {
    proxy: { http: Listen; socks5: Listen };
    admin: Listen;
    callback: Listen;
    store: { path: string };
    platform: Record<string, unknown>;
  };
  config.proxy.http.port = 0;
  config.proxy.socks5.port = 0;
  config.admin.port = 0;
  config.callback.port = 0;
  config.store.path = join(dir, 'rotor.db');
  config.platform = { ...config.platform, ...platform };
  return config;
}

function users(): Array<{ name: string; password: string }> {
  const config = parse(readFileSync(join(ROOT, 'config', 'default.yaml'), 'utf8')) as { users: Array<{ name: string; password: string }> };
  return config.users.map((u) => ({ name: u.name, password: u.password }));
}

function startTarget(): Promise<{ server: Server; port: number }> {
  const body = Buffer.alloc(64, 0x61);
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
    res.end(body);
  });
  return new Promise((ok) =>
    server.listen(0, '127.0.0.1', () => {
      const a = server.address();
      ok({ server, port: typeof a === 'object' && a ? a.port : 0 });
    }),
  );
}

/** Per user: one plain-HTTP GET, one CONNECT tunnel, one SOCKS5 request, each with curl. */
async function warmUp(daemon: Daemon, targetPort: number): Promise<{ ok: number; total: number }> {
  const url = `http://127.0.0.1:${targetPort}/small`;
  let ok = 0;
  let total = 0;
  for (const u of users()) {
    const cred = `${u.name}:${u.password}`;
    const runs = [
      ['-x', `http://127.0.0.1:${daemon.http}`, '-U', cred, url],
      ['-p', '-x', `http://127.0.0.1:${daemon.http}`, '-U', cred, url],
      ['-x', `socks5h://${encodeURIComponent(u.name)}:${encodeURIComponent(u.password)}@127.0.0.1:${daemon.socks5}`, url],
    ];
    for (const args of runs) {
      total++;
      const r = await runCurl(args, { report: true, maxTimeS: 20 });
      if (r.exitCode === 0 && r.status === 200) ok++;
    }
  }
  return { ok, total };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `rotor sim` in its own process, with demo traffic bought for the default config's accounts. */
async function startSim(): Promise<{ proc: Proc; baseUrl: string; appKey: string; appSecret: string }> {
  const { info, proc } = await startJsonChild<{ pid: number; baseUrl: string; appKey: string; appSecret: string }>(process.execPath, [
    join(ROOT, 'bin', 'rotor.js'),
    'sim',
  ]);
  try {
    await creditAccounts(info);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { proc, baseUrl: info.baseUrl, appKey: info.appKey, appSecret: info.appSecret };
}

/**
 * Embedded mode buys demo traffic at start (accounts.sandboxFlowMb); a remote platform does not, so here the
 * default config's main accounts are made and the same purchase is made through the same code, before the
 * daemon starts (as an operator's accounts would already have traffic).
 */
async function creditAccounts(info: { baseUrl: string; appKey: string; appSecret: string }): Promise<void> {
  const { PlatformClient } = await import('../src/platform/client.ts');
  const { ProductCatalog } = await import('../src/accounting/products.ts');
  const { creditDemoFlow } = await import('../src/sim/demo-credit.ts');
  const { createClock } = await import('../src/sim/platform/clock.ts');
  const client = new PlatformClient({ baseUrl: info.baseUrl, appKey: info.appKey, appSecret: info.appSecret });
  const config = parse(readFileSync(join(ROOT, 'config', 'default.yaml'), 'utf8')) as {
    users: Array<{ mainAccount: string; product: string }>;
    accounts: { sandboxFlowMb: number };
  };
  const products = new ProductCatalog({ client });
  const accounts = [];
  for (const u of config.users)
    accounts.push({ mainAccount: u.mainAccount, product: u.product || ((await products.productFor('')) ?? '') });
  for (const main of new Set(accounts.map((a) => a.mainAccount))) await client.call('CreateUser', { appUsername: main, status: 1 });
  const clock = createClock();
  try {
    await creditDemoFlow(accounts, { client, clock, flowMb: config.accounts.sandboxFlowMb });
  } finally {
    clock.stop();
    client.close();
  }
}

export async function measureIdle(
  mode: Mode,
  idleMs: number,
  nodeFlags: string[] = [],
  env: Record<string, string> = {},
  root?: string,
  settleMs = 0,
): Promise<IdleResult> {
  const sim = mode === 'remote' ? await startSim() : undefined;
  const target = await startTarget();
  let daemon: Daemon | undefined;
  try {
    const platform = sim ? { mode: 'remote', baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret } : { mode: 'embedded' };
    daemon = await spawnRotor((dir) => defaultConfig(dir, platform), nodeFlags, 60_000, env, root === undefined ? {} : { root });
    const ready = readRss(daemon.pid);
    await sleep(idleMs);
    const idle = readRss(daemon.pid);
    const heapIdle = await readHeap(daemon.admin);
    const warm = await warmUp(daemon, target.port);
    if (settleMs > 0) await sleep(settleMs);
    const cpuBefore = cpuMs(daemon.pid);
    const t = performance.now();
    await sleep(idleMs);
    const idleCpuMsPerS = idleMs > 0 ? ((cpuMs(daemon.pid) - cpuBefore) * 1000) / (performance.now() - t) : NaN;
    const warmRss = readRss(daemon.pid);
    const heapWarm = await readHeap(daemon.admin);
    return {
      mode,
      ready,
      idle,
      warm: warmRss,
      heapIdle,
      heapWarm,
      idleCpuMsPerS,
      ...(root === undefined ? {} : { root }),
      warmOk: warm.ok,
      warmTotal: warm.total,
      ...(sim ? { simRss: readRss(sim.proc.pid).rss } : {}),
    };
  } finally {
    await daemon?.stop();
    await sim?.proc.stop();
    target.server.close();
  }
}

const fmt = (n: number | undefined): string => (n === undefined || Number.isNaN(n) ? '-' : n.toFixed(1));

function medianResult(results: IdleResult[]): IdleResult {
  const m = (pick: (r: IdleResult) => number | undefined): number => median(results.map(pick).filter((v): v is number => v !== undefined));
  const rss = (pick: (r: IdleResult) => RssSample): RssSample => ({
    rss: m((r) => pick(r).rss),
    anon: m((r) => pick(r).anon),
    file: m((r) => pick(r).file),
  });
  const heap = (pick: (r: IdleResult) => HeapSample | undefined): HeapSample | undefined =>
    results.some((r) => pick(r))
      ? { used: m((r) => pick(r)?.used), total: m((r) => pick(r)?.total), external: m((r) => pick(r)?.external) }
      : undefined;
  const first = results[0]!;
  return {
    mode: first.mode,
    ...(first.root === undefined ? {} : { root: first.root }),
    ready: rss((r) => r.ready),
    idle: rss((r) => r.idle),
    warm: rss((r) => r.warm),
    heapIdle: heap((r) => r.heapIdle),
    heapWarm: heap((r) => r.heapWarm),
    idleCpuMsPerS: m((r) => r.idleCpuMsPerS),
    idleCpuRuns: results.map((r) => r.idleCpuMsPerS),
    warmOk: Math.min(...results.map((r) => r.warmOk)),
    warmTotal: first.warmTotal,
    ...(first.simRss !== undefined ? { simRss: m((r) => r.simRss) } : {}),
  };
}

export function renderIdle(results: IdleResult[], idleS: number): string {
  // A build column only when builds were named (--root): the table of one checkout keeps its columns.
  const builds = results.some((r) => r.root !== undefined);
  const lines = [
    `| mode |${builds ? ' build |' : ''} ready | idle ${idleS} s | after warm-up + ${idleS} s | anon / file (idle) | heap used / total (idle) | heap used / total (warm) | warm-up ok | sim process | CPU idle after warm-up, ms/s |`,
    `| --- |${builds ? ' --- |' : ''} ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |`,
  ];
  for (const r of results) {
    lines.push(
      `| ${r.mode} |${builds ? ` ${r.root ?? '.'} |` : ''} ${fmt(r.ready.rss)} | ${fmt(r.idle.rss)} | ${fmt(r.warm.rss)} | ${fmt(r.idle.anon)} / ${fmt(r.idle.file)} | ${fmt(r.heapIdle?.used)} / ${fmt(r.heapIdle?.total)} | ${fmt(r.heapWarm?.used)} / ${fmt(r.heapWarm?.total)} | ${r.warmOk}/${r.warmTotal} | ${r.simRss !== undefined ? fmt(r.simRss) : '-'} | ${fmt(r.idleCpuMsPerS)} |`,
    );
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      mode: { type: 'string', default: 'embedded,remote' },
      'idle-s': { type: 'string', default: '10' },
      reps: { type: 'string', default: '1' },
      'node-flag': { type: 'string', multiple: true, default: [] },
      env: { type: 'string', multiple: true, default: [] },
      bare: { type: 'boolean', default: false },
      json: { type: 'string' },
      root: { type: 'string', multiple: true, default: [] },
      'settle-s': { type: 'string', default: '0' },
    },
    strict: true,
  });
  const modes = values.mode.split(',').map((m) => m.trim());
  for (const m of modes) if (m !== 'embedded' && m !== 'remote') throw new BenchSetupError(`--mode: unknown mode ${m} (embedded, remote)`);
  const idleS = Number(values['idle-s']);
  const reps = Number(values.reps);
  const settleS = Number(values['settle-s']);
  if (!(settleS >= 0)) throw new BenchSetupError('--settle-s must be >= 0');
  if (!(idleS >= 0) || !(Number.isInteger(reps) && reps >= 1))
    throw new BenchSetupError('--idle-s must be >= 0 and --reps a whole number >= 1');
  const roots: Array<string | undefined> = values.root.length > 0 ? values.root.map((r) => resolve(r)) : [undefined];
  if (roots.includes(undefined)) ensureBuilt((t) => process.stderr.write(`${t}\n`));
  // Each build as its own `npm start` runs it (NAME=value settings and node options), then --env over those.
  const startOf = (root: string | undefined): { env: Record<string, string>; nodeFlags: string[] } => {
    const start = values.bare ? { env: {}, nodeFlags: [] } : npmStartCommand(root);
    const env: Record<string, string> = { ...start.env };
    for (const kv of values.env) {
      const eq = kv.indexOf('=');
      if (eq < 1) throw new BenchSetupError(`--env ${kv}: not NAME=value`);
      env[kv.slice(0, eq)] = kv.slice(eq + 1);
    }
    return { env, nodeFlags: [...start.nodeFlags, ...values['node-flag']] };
  };
  const { env, nodeFlags } = startOf(roots[0]);
  const results: IdleResult[] = [];
  for (const mode of modes as Mode[]) {
    const runs: IdleResult[][] = roots.map(() => []);
    for (let i = 0; i < reps; i++) {
      for (const [k, root] of roots.entries()) {
        process.stderr.write(`idle-rss: ${mode}${root === undefined ? '' : ` ${root}`} ${i + 1}/${reps}\n`);
        const start = startOf(root);
        const r = await measureIdle(mode, idleS * 1000, start.nodeFlags, start.env, root, settleS * 1000);
        process.stderr.write(
          `idle-rss:   CPU idle ${fmt(r.idleCpuMsPerS)} ms/s, load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}\n`,
        );
        runs[k]!.push(r);
      }
    }
    for (const r of runs) results.push(medianResult(r));
  }
  const malloc = Object.entries({ ...process.env, ...env })
    .filter(([k]) => k.startsWith('MALLOC_'))
    .map(([k, v]) => `${k}=${v} `)
    .join('');
  const command = `${malloc}node ${[...nodeFlags, 'bin/rotor.js start'].join(' ')}`;
  process.stdout.write(
    `Idle RSS of \`${command}\` (config/default.yaml, compiled dist/), MiB (the last column CPU, ms per s${settleS > 0 ? `, from ${settleS} s after the warm-up` : ''}), median of ${reps}:\n\n${renderIdle(results, idleS)}\n`,
  );
  if (values.json) writeFileSync(values.json, `${JSON.stringify({ idleS, settleS, reps, command, nodeFlags, results }, null, 2)}\n`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
