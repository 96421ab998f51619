// `npm start` runs the daemon with node's default young generation (16 MiB per semi-space): V8 grows it under
// load, where fewer scavenges and less promotion lower the CPU per tunnel, and shrinks it back to its initial size
// once allocation has slowed, so an idle daemon's RSS is what it was with a 4 MiB cap (docs/benchmarks.md, "M2 per
// tunnel: the young generation's size and the collector's metric"). The child runs with the node options of this
// checkout's package.json start script.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const CHILD = fileURLToPath(new URL('./young-generation-child.ts', import.meta.url));
const PACKAGE = fileURLToPath(new URL('../../package.json', import.meta.url));
const MiB = 1024 * 1024;

/** The node options of `npm start` (between `node` and bin/rotor.js). */
function startNodeOptions(): string[] {
  const start = (JSON.parse(readFileSync(PACKAGE, 'utf8')) as { scripts: { start: string } }).scripts.start;
  const m = /(?:^|\s)node((?:\s+--\S+)*)\s+bin\/rotor\.js\b/.exec(start);
  assert.ok(m, `npm start runs node bin/rotor.js: ${start}`);
  return m[1]!.trim().split(/\s+/).filter(Boolean);
}

test(
  'under npm start’s options the young generation grows past 4 MiB semi-spaces under load and shrinks back when idle',
  { timeout: 180_000 },
  async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [...startNodeOptions(), '--import', 'tsx', CHILD, '120000'], {
      timeout: 170_000,
    });
    const r = JSON.parse(stdout.trim().split('\n').at(-1)!) as { grown: number; shrunk: number; shrunkAfterMs: number | null };
    assert.ok(r.grown > 8 * MiB, `grown to ${(r.grown / MiB).toFixed(1)} MiB (both semi-spaces)`);
    assert.ok(r.shrunkAfterMs !== null, `still ${(r.shrunk / MiB).toFixed(1)} MiB after the idle deadline`);
  },
);
