// The idle-memory bench end to end at CI size: `bench/idle-rss.ts --idle-s 1` starts `rotor start` on
// config/default.yaml (compiled dist/) embedded and against `rotor sim`, samples its RSS from /proc, warms it
// up with curl through both users, and writes the figures. No thresholds: it proves the bench still runs,
// every request of the warm-up is answered, and every figure is a number.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runScript } from '../support/rotor-process.ts';

interface Sample {
  rss: number;
  anon: number;
  file: number;
}
interface Result {
  mode: string;
  ready: Sample;
  idle: Sample;
  warm: Sample;
  heapIdle?: { used: number; total: number };
  warmOk: number;
  warmTotal: number;
  simRss?: number;
  idleCpuMsPerS: number | null;
}

/** The bench with none of the test runner's ROTOR_* variables. */
const run = (args: string[], timeoutMs: number) => runScript('bench/idle-rss.ts', args, timeoutMs, {});

test('bench:idle-rss measures rotor start embedded and against rotor sim', { timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-idle-rss-'));
  try {
    const json = join(dir, 'idle.json');
    const r = await run(['--idle-s', '1', '--json', json], 230_000);
    assert.equal(r.code, 0, `bench failed:\n${r.stderr}`);
    assert.match(r.stdout, /^\| embedded \| \d/m);
    assert.match(r.stdout, /^\| remote \| \d/m);
    const { results } = JSON.parse(readFileSync(json, 'utf8')) as { results: Result[] };
    assert.deepEqual(
      results.map((x) => x.mode),
      ['embedded', 'remote'],
    );
    for (const x of results) {
      for (const s of [x.ready, x.idle, x.warm]) {
        // A node process is tens of MiB; anonymous and file-backed parts add up to the whole.
        assert.ok(s.rss > 20 && s.rss < 4096, `${x.mode}: rss ${s.rss}`);
        assert.ok(Math.abs(s.anon + s.file - s.rss) < 2, `${x.mode}: ${s.anon} + ${s.file} != ${s.rss}`);
      }
      assert.equal(x.warmOk, x.warmTotal, `${x.mode}: ${x.warmOk} of ${x.warmTotal} warm-up requests answered`);
      assert.equal(x.warmTotal, 6);
      // Measured, and far less than a core. An idle daemon arms its timers on demand, so a short window can read
      // no clock tick at all (0 ms/s): the figure is checked to be there, not to be above zero.
      assert.ok(x.idleCpuMsPerS !== null && x.idleCpuMsPerS >= 0 && x.idleCpuMsPerS < 1000, `${x.mode}: idle CPU ${x.idleCpuMsPerS} ms/s`);
      assert.ok(x.heapIdle && x.heapIdle.used > 0 && x.heapIdle.total >= x.heapIdle.used, `${x.mode}: heap ${JSON.stringify(x.heapIdle)}`);
    }
    assert.ok((results[1]!.simRss ?? 0) > 20, 'the sim process has an RSS');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
