// What a daemon on SQLite loads at start (docs/benchmarks.md "Idle RSS"): the Redis driver and the fleet's
// parts are imported only for a redis:// store, so `rotor start` on the default config never holds ioredis.
// The daemon runs in a process of its own (test/cli/fixtures/loaded-packages.ts): this test process may have
// loaded anything.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { REPO_ROOT } from '../support/rotor-process.ts';

function loadedPackages(): Promise<string[]> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('ROTOR_')) env[k] = v;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'test/cli/fixtures/loaded-packages.ts'],
      { cwd: REPO_ROOT, env, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`the daemon's process failed: ${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').at(-1)!) as string[]);
      },
    );
  });
}

test('a daemon on SQLite is ready without loading ioredis', { timeout: 90_000 }, async () => {
  const packages = await loadedPackages();
  // The reading works: the packages the daemon does use are seen.
  for (const used of ['better-sqlite3', 'fastify', 'prom-client'])
    assert.ok(packages.includes(used), `${used} not among ${packages.join(', ')}`);
  assert.ok(!packages.includes('ioredis'), 'ioredis is loaded');
});
