// `npm run bench:logins`: the first login of 1,000 users after a restart, while another user, logged in already,
// keeps working: its p99 must stay under 50 ms throughout (issue 24). Processes:
//   upstream  bench/idle-upstream.ts: a SOCKS5 upstream that is its own target, the drawn line of every user;
//   daemon    `rotor start` as `npm start` runs it (bench/daemon.ts) in a directory kept across its restart;
//   steady    this file with --steady (forked): the logged-in user opens a new CONNECT tunnel every
//             --interval ms (connect, 407-free login from the verified-pair cache, one request, close) and
//             times each;
//   bench     makes the users (POST /v1/users/batch, each with a chosen password given as an scrypt hash, so
//             each first login costs one scrypt verification, on Rotor's hashing threads), restarts the daemon (nothing verified is
//             remembered across a restart), then logs every user in once over CONNECT, --concurrency at a time
//             from 16 loopback source addresses (127.0.1.x, each under proxy.auth.maxPendingPerSource), a
//             login refused as busy retried after 100 ms.
// Reported: the logins' rate, refusals, the daemon's CPU per login (main thread; other threads = the scrypt
// threads), the steady user's p50/p99/max during the logins and before them. What sets the rate: the scrypt
// cost (N=2^14, r=8: ~50 ms of CPU), proxy.auth.maxConcurrentHashes (2) and the CPU the machine has to spare
// (the hashing threads run at proxy.auth.hashNice below the event loop; libuv's pool and UV_THREADPOOL_SIZE
// no longer take part).
//
//   npm run bench:logins -- [--users 1000] [--concurrency 64] [--interval 20] [--hashes N] [--nice N] [--profile DIR]
//
// --hashes N: proxy.auth.maxConcurrentHashes, --nice N: proxy.auth.hashNice (default: the config's defaults). Builds dist/ first when it is older than src/.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { openTunnel, percentile, request, type ProxySpec } from './client.ts';
import { ensureBuilt, npmStartCommand, spawnRotor, SOCKS_PRODUCT, type Daemon } from './daemon.ts';
import { BenchSetupError, startJsonChild } from './procs.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const TOKEN = 'logins-bench-token-7d2e';
const STEADY = 'steady';
const STEADY_PASSWORD = 'steady-user-pw';
const LOGIN_PASSWORD = 'first-login-pw';
const SOURCES = 16;

const log = (line: string): void => void process.stdout.write(`${line}\n`);
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
const userName = (n: number): string => `l${String(n).padStart(5, '0')}`;

// ───────────────────────────── the steady user (child process) ─────────────────────────────

interface Sample {
  /** Date.now() at the start */
  at: number;
  ms: number;
  ok: boolean;
}

async function steady(proxy: ProxySpec, target: number, intervalMs: number): Promise<void> {
  const samples: Sample[] = [];
  let running = true;
  process.on('message', () => {
    running = false;
  });
  process.send!({ ready: true });
  let next = performance.now();
  while (running) {
    const at = Date.now();
    const started = performance.now();
    let ok = true;
    try {
      const socket = await openTunnel(proxy, target);
      await request(socket, target, '/steady', true, 10_000).finally(() => socket.destroy());
    } catch {
      ok = false;
    }
    samples.push({ at, ms: performance.now() - started, ok });
    next += intervalMs;
    const wait = next - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    else next = performance.now();
  }
  process.send!({ samples }, () => process.exit(0));
}

// ───────────────────────────── the bench ─────────────────────────────

function configFor(dir: string, upstreamPort: number, hashes: number | undefined, nice: number | undefined): Record<string, unknown> {
  return {
    platform: { mode: 'embedded', sandbox: { drawnLines: { [SOCKS_PRODUCT]: [`socks5://up:up-pass@127.0.0.1:${upstreamPort}`] } } },
    proxy: {
      http: { host: '127.0.0.1', port: 0 },
      socks5: { host: '127.0.0.1', port: 0 },
      auth: { ...(hashes !== undefined ? { maxConcurrentHashes: hashes } : {}), ...(nice !== undefined ? { hashNice: nice } : {}) },
    },
    admin: { host: '127.0.0.1', port: 0, token: TOKEN },
    callback: { host: '127.0.0.1', port: 0 },
    store: { path: join(dir, 'rotor.db') },
    log: { level: 'info' },
    users: [
      { name: STEADY, password: STEADY_PASSWORD, mainAccount: 'bench', product: SOCKS_PRODUCT, draw: 'pwd', sessTime: 5, limitBytes: -1 },
    ],
    pool: { lowWater: 1, drawBatch: 1 },
  };
}

async function makeUsers(d: Daemon, count: number, hash: string): Promise<void> {
  for (let from = 0; from < count; from += 1000) {
    const rows = [];
    for (let n = from; n < Math.min(count, from + 1000); n++)
      rows.push({ name: userName(n), mainAccount: 'bench', product: SOCKS_PRODUCT, passwordHash: hash });
    const res = await fetch(`http://127.0.0.1:${d.admin}/v1/users/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ users: rows }),
    });
    const body = (await res.json()) as { created?: number };
    if (res.status !== 200 || body.created !== rows.length)
      throw new BenchSetupError(`batch at ${from}: ${res.status} ${JSON.stringify(body)}`);
  }
}

/** One login over CONNECT from `localAddress`: the status line's code, then (on 200) one request through the tunnel. */
function login(port: number, localAddress: string, user: string, password: string): Promise<number> {
  return new Promise((ok) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress });
    let head = '';
    let status = 0;
    const timer = setTimeout(() => socket.destroy(), 30_000);
    socket.setNoDelay(true);
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      ok(status);
    });
    socket.on('data', (chunk: Buffer) => {
      if (status !== 0) {
        // The target's answer through the tunnel: done once it closes.
        return;
      }
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      status = Number(head.slice(9, 12));
      if (status !== 200) return void socket.destroy();
      socket.write('GET /first HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    });
    const auth = Buffer.from(`${user}:${password}`).toString('base64');
    socket.write(`CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
  });
}

interface LoginRun {
  seconds: number;
  startedAt: number;
  endedAt: number;
  ok: number;
  busy: number;
  failed: number;
}

async function loginAll(d: Daemon, count: number, concurrency: number): Promise<LoginRun> {
  let next = 0;
  let ok = 0;
  let busy = 0;
  let failed = 0;
  const startedAt = Date.now();
  const started = performance.now();
  const worker = async (w: number): Promise<void> => {
    const source = `127.0.1.${1 + (w % SOURCES)}`;
    while (next < count) {
      const name = userName(next++);
      for (let attempt = 0; ; attempt++) {
        const status = await login(d.http, source, name, LOGIN_PASSWORD);
        if (status === 200) {
          ok++;
          break;
        }
        // 407 for a shed check ('too many logins waiting') as for a wrong password: retried a few times.
        if (attempt >= 20) {
          failed++;
          break;
        }
        busy++;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  return { seconds: (performance.now() - started) / 1000, startedAt, endedAt: Date.now(), ok, busy, failed };
}

function startSteady(proxy: ProxySpec, target: number, intervalMs: number): Promise<{ stop: () => Promise<Sample[]> }> {
  return new Promise((ok, fail) => {
    const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['--steady', JSON.stringify({ proxy, target, intervalMs })], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child.once('exit', (code) => fail(new BenchSetupError(`steady client exited early (${code})`)));
    child.once('message', () => {
      child.removeAllListeners('exit');
      ok({
        stop: () =>
          new Promise((done) => {
            child.once('message', (m: { samples: Sample[] }) => done(m.samples));
            child.send({ stop: true });
          }),
      });
    });
  });
}

/** CPU ms (user + system) of the daemon's main thread and of its other threads (libuv's pool, V8's helpers). */
function threadCpu(pid: number): { main: number; others: number } {
  let main = 0;
  let others = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
      if (Number(tid) === pid) main += ms;
      else others += ms;
    } catch {
      // the thread ended
    }
  }
  return { main, others };
}

function summary(samples: Sample[]): string {
  const ms = samples.filter((s) => s.ok).map((s) => s.ms);
  ms.sort((a, b) => a - b);
  const failed = samples.length - ms.length;
  return `p50 ${percentile(ms, 50).toFixed(2)} ms, p99 ${percentile(ms, 99).toFixed(2)} ms, max ${(ms[ms.length - 1] ?? NaN).toFixed(1)} ms (${ms.length} requests, ${failed} failed)`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      users: { type: 'string', default: '1000' },
      concurrency: { type: 'string', default: '64' },
      interval: { type: 'string', default: '20' },
      hashes: { type: 'string' },
      nice: { type: 'string' },
      profile: { type: 'string' },
    },
  });
  const count = Number(values.users);
  const concurrency = Number(values.concurrency);
  const intervalMs = Number(values.interval);
  const hashes = values.hashes !== undefined ? Number(values.hashes) : undefined;
  const nice = values.nice !== undefined ? Number(values.nice) : undefined;
  ensureBuilt(log);
  const { hashPasswordAsync } = await import('../src/admission/password.ts');
  const hash = await hashPasswordAsync(LOGIN_PASSWORD);
  const upstream = await startJsonChild<{ pid: number; port: number }>(process.execPath, [
    '--import',
    'tsx',
    join(HERE, 'idle-upstream.ts'),
    '--serve',
  ]);
  const dir = mkdtempSync(join(tmpdir(), 'rotor-bench-logins-'));
  const { env, nodeFlags } = npmStartCommand();
  // --profile DIR: the restarted daemon writes a --cpu-prof profile into DIR (read it with bench/profile.ts).
  const profileFlags = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(values.profile)}`] : [];
  const start = (flags: string[] = []): Promise<Daemon> =>
    spawnRotor(() => configFor(dir, upstream.info.port, hashes, nice), [...nodeFlags, ...flags], 120_000, env, { dir });
  let daemon: Daemon | undefined;
  try {
    log(
      `bench:logins: ${count} users, ${concurrency} logins at once from ${SOURCES} addresses, steady user every ${intervalMs} ms; ` +
        `maxConcurrentHashes ${hashes ?? '(default)'}, hashNice ${nice ?? '(default)'}; load ${load()}`,
    );
    daemon = await start();
    const made = performance.now();
    await makeUsers(daemon, count, hash);
    log(`  ${count} users made in ${((performance.now() - made) / 1000).toFixed(1)} s`);
    await daemon.stop();
    daemon = await start(profileFlags);
    log(`  restarted; load ${load()}`);
    const proxy: ProxySpec = { kind: 'connect', port: daemon.http, username: STEADY, password: STEADY_PASSWORD };
    // The steady user logs in (its one scrypt check) and its pool is drawn before anything is measured.
    const first = await openTunnel(proxy, upstream.info.port);
    await request(first, upstream.info.port, '/warm', true).finally(() => first.destroy());
    const steadyClient = await startSteady(proxy, upstream.info.port, intervalMs);
    await new Promise((r) => setTimeout(r, 5000));
    const cpuBefore = threadCpu(daemon.pid);
    const run = await loginAll(daemon, count, concurrency);
    const cpuAfter = threadCpu(daemon.pid);
    await new Promise((r) => setTimeout(r, 2000));
    const samples = await steadyClient.stop();
    const before = samples.filter((s) => s.at < run.startedAt);
    const during = samples.filter((s) => s.at >= run.startedAt && s.at <= run.endedAt);
    const duringMs = during.filter((s) => s.ok).map((s) => s.ms);
    duringMs.sort((a, b) => a - b);
    const p99 = percentile(duringMs, 99);
    const rate = run.ok / run.seconds;
    log('');
    log(`| figure | value | target | met |`);
    log(`|---|---|---|---|`);
    log(
      `| first logins after a restart | ${run.ok} of ${count} in ${run.seconds.toFixed(1)} s = ${rate.toFixed(1)}/s ` +
        `(${run.busy} refused as busy and retried, ${run.failed} failed) | | |`,
    );
    log(
      `| daemon CPU per first login | main thread ${((cpuAfter.main - cpuBefore.main) / run.ok).toFixed(1)} ms, ` +
        `other threads (the scrypt threads, V8's helpers) ${((cpuAfter.others - cpuBefore.others) / run.ok).toFixed(1)} ms | | |`,
    );
    log(`| steady user before the logins | ${summary(before)} | | |`);
    log(`| steady user during the logins | ${summary(during)} | p99 < 50 ms | ${p99 < 50 && during.every((s) => s.ok) ? 'yes' : 'no'} |`);
    log(`load ${load()}`);
  } finally {
    await daemon?.stop();
    await upstream.proc.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv.includes('--steady')) {
  const spec = JSON.parse(process.argv[process.argv.indexOf('--steady') + 1]!) as { proxy: ProxySpec; target: number; intervalMs: number };
  await steady(spec.proxy, spec.target, spec.intervalMs);
} else if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main();
}
