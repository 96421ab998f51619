// How the benches read `npm start` (bench/daemon.ts npmStartCommand): the NAME=value settings before `node`
// become the daemon's environment, the options between `node` and bin/rotor.js its node options; anything
// else in scripts.start is refused rather than half-read. And this checkout's own start script parses.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describeNpmStart, npmStartCommand } from '../../bench/daemon.ts';

function withStart(start: string, fn: (root: string) => void): void {
  const root = mkdtempSync(join(tmpdir(), 'rotor-npm-start-'));
  try {
    writeFileSync(join(root, 'package.json'), JSON.stringify({ scripts: { start } }));
    fn(root);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

test('environment and node options are read from scripts.start', () => {
  withStart('MALLOC_MMAP_THRESHOLD_=4194304 MALLOC_TRIM_THRESHOLD_=16777216 node --max-semi-space-size=4 bin/rotor.js start', (root) => {
    assert.deepEqual(npmStartCommand(root), {
      env: { MALLOC_MMAP_THRESHOLD_: '4194304', MALLOC_TRIM_THRESHOLD_: '16777216' },
      nodeFlags: ['--max-semi-space-size=4'],
    });
    assert.equal(describeNpmStart(root), 'MALLOC_MMAP_THRESHOLD_=4194304 MALLOC_TRIM_THRESHOLD_=16777216 node --max-semi-space-size=4');
  });
  withStart('node bin/rotor.js start', (root) => assert.deepEqual(npmStartCommand(root), { env: {}, nodeFlags: [] }));
});

test('a start script of another shape is refused', () => {
  withStart('tsx src/cli.ts start', (root) => assert.throws(() => npmStartCommand(root), /scripts\.start is not/));
  withStart('env X=1 node bin/rotor.js start', (root) => assert.throws(() => npmStartCommand(root), /scripts\.start is not/));
});

test("this checkout's npm start parses", () => {
  const { nodeFlags, env } = npmStartCommand();
  assert.ok(
    nodeFlags.every((f) => f.startsWith('--')),
    nodeFlags.join(' '),
  );
  assert.ok(
    Object.keys(env).every((k) => /^[A-Z_][A-Z0-9_]*$/.test(k)),
    Object.keys(env).join(' '),
  );
});
