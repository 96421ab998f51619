#!/usr/bin/env node
// Runs the whole suite with node's own test runner and tsx as the TypeScript loader.
// Node 20's --test takes no globs, so the files are listed here; pass paths or substrings to narrow.
//
// The Redis pass (the suite passes on the Redis driver as on SQLite): every test file that opens its store
// through test/support/store.ts (directly or through a harness) and starts no whole daemon runs a second time with
// ROTOR_TEST_STORE=redis, on one redis-server this script starts for the run (ROTOR_TEST_REDIS_URL) and stops
// at the end. Both passes are one `node --test` run — each Redis copy is a small wrapper file that sets the
// variable and imports the test file inside a suite named "redis: <path>" — so the closing lines are node's
// own summary of both, and one exit code. Skipped when redis-server is missing (a line says so) or with
// ROTOR_TEST_REDIS_PASS=off.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, existsSync, symlinkSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { listFiles } from './files.mjs';

const walk = (dir) => listFiles(dir, (name) => name.endsWith('.test.ts'));

const STORE_SEAM = resolve('test/support/store.ts');
// Not run twice although they reach the seam: the fleet and store tests pick their drivers themselves, and
// the crash test imports a helper of daemon.ts but is SQLite-specific by design. The dashboard's browser test
// drives the UI over the admin API, which the store passes already cover; a second browser run would only
// double its time.
const chooseOwnStore = (f) =>
  f.startsWith('test/fleet/') ||
  f.startsWith('test/store/') ||
  f === 'test/reliability/crash.test.ts' ||
  f === 'test/e2e/dashboard.test.ts';
// Not run twice either: files that start a daemon (so they reach the seam) but assert nothing the store
// takes part in. upstream-health measures dials, hedges and probes against stalled nodes; promtool checks
// the metrics text. A second pass on Redis would repeat the same sockets and timers. The admin server's
// files below build it over the store-backed harness but assert what no store reading changes: the token
// decided on the matched route (authz: 8,400 spellings, a spy shows no route ran without it), the OpenAPI
// document and its lint, the dashboard's static files, and the logging of a throwing route or callback
// (admin/routes, bans, server and users-fuzz, which do read and write through the store, stay in the pass).
const STORE_BLIND = [
  'test/e2e/upstream-health.test.ts',
  'test/telemetry/promtool.test.ts',
  'test/admin/authz.test.ts',
  'test/admin/openapi.test.ts',
  'test/admin/ui.test.ts',
  'test/admin/logging.test.ts',
];
const storeBlind = (f) => STORE_BLIND.includes(f);

/** Whether `file` imports the store seam, directly or through relative imports (test helpers). */
function usesTestStore(file, seen = new Set()) {
  const abs = resolve(file);
  if (abs === STORE_SEAM) return true;
  if (seen.has(abs) || !existsSync(abs) || abs.includes('/src/')) return false;
  seen.add(abs);
  const text = readFileSync(abs, 'utf8');
  for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*)['"](\.{1,2}\/[^'"]+\.ts)['"]/g)) {
    if (usesTestStore(join(dirname(abs), m[1]), seen)) return true;
  }
  return false;
}

function freePort() {
  return new Promise((done, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => done(port));
    });
  });
}

async function startRedis(dir) {
  const bin = process.env.ROTOR_REDIS_SERVER ?? 'redis-server';
  if (spawnSync(bin, ['--version']).status !== 0) return undefined;
  const port = await freePort();
  mkdirSync(dir, { recursive: true });
  const child = spawn(
    bin,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--loglevel', 'warning'],
    { stdio: 'ignore' },
  );
  const until = Date.now() + 5000;
  for (;;) {
    const up = await new Promise((done) => {
      const s = connect({ host: '127.0.0.1', port });
      s.once('connect', () => (s.destroy(), done(true)));
      s.once('error', () => (s.destroy(), done(false)));
    });
    if (up) return { child, url: `redis://127.0.0.1:${port}` };
    if (child.exitCode !== null || Date.now() > until) {
      child.kill('SIGKILL');
      return undefined;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

// `--unit` (npm run test:unit): the fast tier, for a developer's loop. It leaves out the folders that run
// daemons as child processes or against a Redis fleet, any other file that starts a whole daemon (through
// the e2e harnesses or the child launcher), and the Redis pass; `npm test` runs everything.
const SLOW_TIERS = ['test/e2e/', 'test/reliability/', 'test/bench/', 'test/fleet/', 'test/cli/'];
const RUNS_A_DAEMON = /e2e\/(?:limits-)?harness\.ts|support\/rotor-process\.ts|'src\/cli\.ts'/;
// Volume tests outside those folders are left out too: thousands of requests or rows to show a property
// holds at scale (the token on 8,400 spellings, 2,400 malformed user bodies, 10,000 users, 100,000 log rows,
// the sandbox's state file with 20,000 sub accounts).
const VOLUME = [
  'test/admin/authz.test.ts',
  'test/sim/persistence-writes.test.ts',
  'test/admin/users-fuzz.test.ts',
  'test/users/scale.test.ts',
  'test/connlog/query-speed.test.ts',
];
const runsADaemon = (f) => SLOW_TIERS.some((t) => f.startsWith(t)) || RUNS_A_DAEMON.test(readFileSync(f, 'utf8'));
const slowTier = (f) => runsADaemon(f) || VOLUME.includes(f);
const unit = process.argv.includes('--unit');
if (unit) process.env.ROTOR_TEST_REDIS_PASS = 'off';
// `--durations <file>`: also write each file's wall time there, slowest first (scripts/file-durations.mjs).
const durationsAt = process.argv.indexOf('--durations');
const durationsFile = durationsAt >= 0 ? resolve(process.argv[durationsAt + 1] ?? 'test-durations.txt') : undefined;
const filters = process.argv.slice(2).filter((a, i, all) => a !== '--unit' && a !== '--durations' && all[i - 1] !== '--durations');
const files = walk('test')
  .sort()
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .filter((f) => !unit || !slowTier(f));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}

const env = { ...process.env, ROTOR_LOG_LEVEL: process.env.ROTOR_LOG_LEVEL ?? 'silent' };
const work = mkdtempSync(join(tmpdir(), 'rotor-test-run-'));

// Bundles: the fast tier's files (no daemon, no volume: slowTier false) run several to a process, each inside a
// suite named after its path. A test process costs about 0.8 s of CPU before its first test (tsx, then the
// same src modules imported again), and the fast tier is most of the files: 20 of them took 22.9 s of CPU as
// 20 processes and 6.8 s as one. A file's module code runs when its suite is built, its hooks and tests in
// that suite; `ROTOR_TEST_BUNDLE=off` gives every file its own process again (to rule out a neighbour).
const BUNDLE_FILES = 8;
const bundling = (process.env.ROTOR_TEST_BUNDLE ?? 'on') !== 'off';
function bundles(list, dir, { redis = false, size = BUNDLE_FILES } = {}) {
  if (!bundling) return list.map((f) => wrap([f], join(work, dir, f.replace(/\.ts$/, '.mjs')), redis));
  const out = [];
  for (let i = 0; i < list.length; i += size)
    out.push(wrap(list.slice(i, i + size), join(work, dir, `bundle-${String(out.length + 1).padStart(2, '0')}.test.mjs`), redis));
  return out;
}
const members = new Map();
/** A wrapper file that runs `group` in one process, each file inside a suite named after its path. */
function wrap(group, wrapper, redis) {
  mkdirSync(dirname(wrapper), { recursive: true });
  const suites = group.map(
    (f) => `describe(${JSON.stringify(redis ? `redis: ${f}` : f)}, async () => {\n  await import(${JSON.stringify(resolve(f))});\n});\n`,
  );
  writeFileSync(
    wrapper,
    `import { describe } from 'node:test';\n${redis ? `process.env.ROTOR_TEST_STORE = 'redis';\n` : ''}${suites.join('')}`,
  );
  members.set(wrapper, group);
  return wrapper;
}
// Files that read the whole process (its threads, handles, descriptors, timers made by a module, unhandled
// rejections) keep a process of their own: a neighbour's leftovers would be in their count.
const ALONE = [
  'test/admission/hash-threads.test.ts',
  'test/proxy/accept-errors.test.ts',
  'test/proxy/accept-guard.test.ts',
  'test/proxy/warm.test.ts',
  'test/sim/robustness.test.ts',
  'test/telemetry/logger.test.ts',
];
// End-to-end and fleet files of up to ~20 s (in-process daemons, or children they stop themselves) are
// bundled four to a process: each pays about 1.4 s of CPU importing the harness and the daemon. A new file
// runs alone until it is added here; the long ones stay alone so two of them can run side by side.
const BUNDLED_E2E = [
  'test/e2e/abuse-bounds.test.ts',
  'test/e2e/abuse-connlog.test.ts',
  'test/e2e/abuse-pipelining.test.ts',
  'test/e2e/backconnect.test.ts',
  'test/e2e/browser.test.ts',
  'test/e2e/dashboard-bans.test.ts',
  'test/e2e/events-reload.test.ts',
  'test/e2e/https-proxy.test.ts',
  'test/e2e/https-sighup.test.ts',
  'test/e2e/ipv6.test.ts',
  'test/e2e/login-cache.test.ts',
  'test/e2e/operator.test.ts',
  'test/e2e/portal.test.ts',
  'test/e2e/product-draws.test.ts',
  'test/e2e/rate-shared.test.ts',
  'test/e2e/rules.test.ts',
  'test/e2e/security.test.ts',
  'test/e2e/tls-upstream.test.ts',
  'test/e2e/udp-associate.test.ts',
  'test/e2e/udp-bounds.test.ts',
  'test/e2e/unsent-limit.test.ts',
  'test/e2e/unsent-limit-bulk.test.ts',
  'test/e2e/user-ports-tls.test.ts',
  'test/e2e/user-ports.test.ts',
  'test/e2e/users-batch.test.ts',
  'test/e2e/users-crash.test.ts',
  'test/e2e/users-http-rate.test.ts',
  'test/e2e/users-import-store.test.ts',
  'test/e2e/users-paging.test.ts',
  'test/e2e/users.test.ts',
  // The fleet's component files: a Redis of their own, a second or two each.
  'test/fleet/adoption.test.ts',
  'test/fleet/allowance-replay.test.ts',
  'test/fleet/allowance.test.ts',
  'test/fleet/gateway.test.ts',
  'test/fleet/lease.test.ts',
  'test/fleet/outage.test.ts',
  'test/fleet/persistence.test.ts',
  'test/fleet/sessions.test.ts',
  // Other files that start a daemon (in process or as a child they stop) and take a few seconds: each process
  // costs ~1.2 s of CPU before its first test, and the suite is CPU-bound on a loaded machine.
  'test/accounts/heal.test.ts',
  'test/accounts/no-balance.test.ts',
  'test/bench/npm-start.test.ts',
  'test/cli/loaded-packages.test.ts',
  'test/cli/startup.test.ts',
  'test/connlog/checkpoints.test.ts',
  'test/connlog/daemon.test.ts',
  'test/connlog/record-fields.test.ts',
  'test/connlog/records.test.ts',
  'test/connlog/store.test.ts',
  'test/fleet/users.test.ts',
  'test/portal/portal-api.test.ts',
  'test/portal/portal-listener.test.ts',
  'test/reliability/platform-faults.test.ts',
  'test/reliability/upstream-faults.test.ts',
  'test/sim/persistence.test.ts',
  'test/telemetry/promtool.test.ts',
];
const single = (f) => !bundling || ALONE.includes(f) || (slowTier(f) && !BUNDLED_E2E.includes(f));
// The benches' files run `rotor start` from dist/, which bench/daemon.ts ensureBuilt builds when it is missing
// or older than src/ (one build at a time per checkout). The build starts with the run, beside the first
// files, and those files start after the others that run alone, so neither waits idle on tsc.
const NEEDS_DIST = ['test/bench/idle-rss.test.ts', 'test/bench/smoke.test.ts'];
const alone = files.filter((f) => single(f) && !NEEDS_DIST.includes(f));
const afterBuild = files.filter((f) => single(f) && NEEDS_DIST.includes(f));
const prebuild = files.some((f) => NEEDS_DIST.includes(f))
  ? spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', "(await import('./bench/daemon.ts')).ensureBuilt((t) => console.log(`# ${t}`));"],
      { stdio: 'inherit', env },
    )
  : undefined;
const e2eBundles = bundles(
  files.filter((f) => BUNDLED_E2E.includes(f) && !single(f)),
  'bundles-e2e',
  { size: 4 },
);
const unitBundles = bundles(
  files.filter((f) => !BUNDLED_E2E.includes(f) && !single(f)),
  'bundles',
);
let redis;
const redisFiles = [];
const wantRedisPass = (process.env.ROTOR_TEST_REDIS_PASS ?? 'on') !== 'off' && (process.env.ROTOR_TEST_STORE ?? 'sqlite') === 'sqlite';
// End-to-end files (a whole daemon) are not run again on Redis: the store's contract tests (test/store/) run on
// both drivers and the fleet tests (test/fleet/) on a real redis-server; a second pass of every daemon file only
// repeated the same sockets and timers. The Redis pass keeps the component tests that reach the store.
const storeUsers = files.filter((f) => !chooseOwnStore(f) && !storeBlind(f) && !runsADaemon(f) && usesTestStore(f));
if (storeUsers.length > 0 && (wantRedisPass || process.env.ROTOR_TEST_STORE === 'redis')) {
  redis = await startRedis(join(work, 'redis'));
  if (redis) env.ROTOR_TEST_REDIS_URL = redis.url;
}
if (wantRedisPass && storeUsers.length > 0) {
  if (redis) {
    redisFiles.push(...bundles(storeUsers, 'redis-pass', { redis: true }));
    console.log(`# redis pass: ${storeUsers.length} files (${storeUsers.join(' ')}) on ${redis.url}, in the same run`);
  } else {
    console.log(`# redis pass: skipped (no redis-server started; install the Debian package redis-server or set ROTOR_REDIS_SERVER)`);
  }
}

// Node's runner sorts the files it is given by their paths, whatever order they come in, and this run's
// work directory sorts before or after test/ depending on where the checkout is. Each file and bundle is
// linked here as order/NNN/<its path>, so that node's sort is this order: the files and end-to-end bundles
// that run alone, longest first (two slots: the run should not end on a long file while the other slot
// idles), then the benches once their build has had time, the Redis pass, and the fast tier's short bundles
// last. A figure below is the seconds a file took in a suite at load 1-9 (--durations); a file not named
// counts as 5 s, and a stale figure only makes the order a little worse.
const SECONDS = {
  'test/cli/cli.test.ts': 30,
  'test/reliability/fuzz.test.ts': 44,
  'test/e2e/dashboard.test.ts': 25,
  'test/e2e/portal.test.ts': 25,
  'test/admin/authz.test.ts': 30,
  'test/reliability/crash.test.ts': 28,
  'test/e2e/upstream-health.test.ts': 27,
  'test/cli/call-daemon.test.ts': 18,
  'test/fleet/restart.test.ts': 24,
  'test/e2e/users-startup.test.ts': 23,
  'test/fleet/open-records.test.ts': 22,
  'test/connlog/shutdown.test.ts': 21,
  'test/e2e/users.test.ts': 21,
  'test/fleet/daemons.test.ts': 18,
  'test/cli/startup.test.ts': 12,
  'test/e2e/users-restart.test.ts': 17,
  'test/e2e/events.test.ts': 16,
  'test/admin/users-fuzz.test.ts': 16,
  'test/e2e/gateway.test.ts': 16,
  'test/e2e/abuse-release.test.ts': 15,
  'test/e2e/operator.test.ts': 14,
  'test/connlog/daemon.test.ts': 13,
  'test/sim/persistence-writes.test.ts': 12,
  'test/e2e/limits.test.ts': 12,
  'test/e2e/abuse-auth.test.ts': 12,
  'test/admission/hash-threads.test.ts': 11,
  'test/e2e/descriptors.test.ts': 11,
  'test/cli/loaded-packages.test.ts': 11,
  'test/fleet/users.test.ts': 11,
  'test/e2e/users-http-rate.test.ts': 10,
  'test/sim/persistence.test.ts': 10,
  'test/e2e/rate-shared.test.ts': 9,
  'test/e2e/abuse-connlog.test.ts': 9,
  'test/e2e/abuse-bounds.test.ts': 8,
  'test/e2e/events-reload.test.ts': 8,
  'test/e2e/https-proxy.test.ts': 8,
  'test/e2e/users-crash.test.ts': 8,
  'test/e2e/browser.test.ts': 7,
  'test/e2e/users-import-store.test.ts': 7,
  'test/e2e/dashboard-bans.test.ts': 7,
};
const seconds = (path) => (members.get(path) ?? [path]).reduce((sum, f) => sum + (SECONDS[f] ?? 5), 0);
const longestFirst = (list) => [...list].sort((a, b) => seconds(b) - seconds(a));
const ordered = [...longestFirst([...alone, ...e2eBundles]), ...afterBuild, ...redisFiles, ...unitBundles].map((path, i) => {
  const link = join(work, 'order', String(i).padStart(3, '0'), path.startsWith(work) ? path.slice(work.length + 1) : path);
  mkdirSync(dirname(link), { recursive: true });
  symlinkSync(resolve(path), link);
  return link;
});

// --durations: each test process also notes its start, end and CPU (scripts/process-clock.mjs), summed up
// in <durations file>.processes when the run ends.
const clock = durationsFile ? join(work, 'clock.jsonl') : undefined;
if (clock) env.ROTOR_TEST_CLOCK = clock;
const started = Date.now();
const child = spawn(
  process.execPath,
  [
    '--import',
    'tsx',
    ...(clock ? ['--import', resolve('scripts/process-clock.mjs')] : []),
    '--test',
    // The fast tier's files mostly wait on sockets and timers: three at a time on two cores (64 s -> 51 s quiet).
    unit ? '--test-concurrency=3' : '--test-concurrency=2',
    // Node applies this to each file's process as a whole (a bundle of files is one process), as well as to each
    // test without its own: 120 s ran out on test/reliability/fuzz in a suite at load 10-14. A hang still ends.
    '--test-timeout=300000',
    // Node's own reporter (spec on a terminal, TAP otherwise), then the failures again after the totals
    // (scripts/failures-reporter.mjs): a CI log read from its end names what failed.
    process.stdout.isTTY ? '--test-reporter=spec' : '--test-reporter=tap',
    '--test-reporter-destination=stdout',
    `--test-reporter=${resolve('scripts/failures-reporter.mjs')}`,
    '--test-reporter-destination=stdout',
    ...(durationsFile ? [`--test-reporter=${resolve('scripts/file-durations.mjs')}`, `--test-reporter-destination=${durationsFile}`] : []),
    // Files start in this order, two at a time: the fast tier's bundles (a few seconds each) last, so that
    // the run does not end on one long file while the other slot idles.
    ...ordered,
  ],
  { stdio: 'inherit', env },
);
const cleanup = () => {
  if (clock) writeProcessClock();
  redis?.child.kill('SIGKILL');
  if (prebuild?.exitCode === null) prebuild.kill('SIGTERM');
  rmSync(work, { recursive: true, force: true });
};
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code, signal) => {
  cleanup();
  process.exit(signal ? 1 : (code ?? 1));
});

/** <durations>.processes: one line per test process by start (seconds into the run, wall, CPU), then the sums. */
function writeProcessClock() {
  const rows = existsSync(clock)
    ? readFileSync(clock, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    : [];
  const name = (file) => file.replace(/^.*\/order\/\d+\//, '');
  rows.sort((a, b) => a.start - b.start);
  const lines = rows.map(
    (r) =>
      `${((r.start - started) / 1000).toFixed(1).padStart(7)} ${((r.end - r.start) / 1000).toFixed(1).padStart(6)} s wall ${(r.cpuMs / 1000).toFixed(1).padStart(6)} s CPU  ${name(r.file)}`,
  );
  const cpu = rows.reduce((sum, r) => sum + r.cpuMs, 0) / 1000;
  lines.push(
    `run: ${((Date.now() - started) / 1000).toFixed(1)} s wall; ${rows.length} test processes, ${cpu.toFixed(1)} s CPU (not their children's)`,
  );
  writeFileSync(`${durationsFile}.processes`, `${lines.join('\n')}\n`);
}
