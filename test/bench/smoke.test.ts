// The CI-sized bench: `bench/run.ts --smoke` end to end on loopback: real microsocks, squid and wrk, the
// target, the minimal gateway and the real daemon (`rotor start` on the embedded sandbox, which hands out
// squid and microsocks as drawn lines). No thresholds: it proves the bench still runs and yields a number
// for every case and path, and both ratios.
import { spawnSync } from 'node:child_process';
import { runScript } from '../support/rotor-process.ts';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';

const TOOLS = ['microsocks', 'squid', 'wrk'];
const missing = TOOLS.filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);

interface Row {
  case: string;
  name: string;
  direct: number;
  minimal: number;
  rotor: number;
  ratio: number;
  ratioMinimal: number;
  errors: number;
  note?: string;
}

const run = (args: string[], timeoutMs: number) => runScript('bench/run.ts', args, timeoutMs);

test(
  'bench --smoke measures every case on the three paths, the real daemon among them',
  { skip: missing.length > 0 ? `needs ${missing.join(', ')} (Debian packages ${missing.join(' ')})` : false, timeout: 120_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotor-bench-smoke-'));
    try {
      const json = join(dir, 'result.json');
      const r = await run(['--smoke', '--json', json], 110_000);
      assert.equal(r.code, 0, `bench failed:\n${r.stderr}`);
      for (const id of ['M1', 'M2', 'M3', 'M4', 'M5']) assert.match(r.stdout, new RegExp(`^${id} `, 'm'), `table lacks ${id}`);
      assert.match(r.stdout, /rotor\/direct/);
      assert.match(r.stdout, /rotor\/minimal/);
      assert.match(r.stdout, /Idle RSS after start, MiB: rotor \d/);

      // M2 again with every path at one offered rate, in the CPU table: each path carried all the tunnels offered.
      const result = JSON.parse(readFileSync(json, 'utf8')) as {
        rows: Row[];
        oneRate?: { perSecond: number };
        windows: Array<{ key: string; path: string; ops: number }>;
      };
      assert.ok(result.oneRate && result.oneRate.perSecond >= 10, `one rate: ${JSON.stringify(result.oneRate)}`);
      assert.match(r.stdout, new RegExp(`^M2 socks5 at ${result.oneRate.perSecond}/s +tunnel +rotor `, 'm'));
      const offered = Math.floor((result.oneRate.perSecond * 300) / 1000);
      for (const path of ['direct', 'minimal', 'rotor'])
        for (const proto of ['connect', 'socks5']) {
          const w = result.windows.find((x) => x.key === `M2 ${proto} at ${result.oneRate!.perSecond}/s` && x.path === path);
          assert.equal(w?.ops, offered, `${path} ${proto} at one rate: ${w?.ops} of ${offered} tunnels`);
        }

      const keys = result.rows.map((row) => row.name);
      assert.equal(result.rows.length, 11, `rows: ${keys.join(', ')}`);
      for (const row of result.rows) {
        for (const field of ['direct', 'minimal', 'rotor'] as const) {
          assert.ok(Number.isFinite(row[field]), `${row.name}: ${field} = ${row[field]}`);
        }
        if (row.case !== 'M5') {
          assert.ok(row.direct > 0 && row.minimal > 0 && row.rotor > 0, `${row.name}: ${row.direct} / ${row.minimal} / ${row.rotor}`);
          assert.ok(
            Number.isFinite(row.ratio) && Number.isFinite(row.ratioMinimal),
            `${row.name}: ratios ${row.ratio} ${row.ratioMinimal}`,
          );
        }
        assert.equal(row.errors, 0, `${row.name}: ${row.errors} failed operations`);
      }
      for (const row of result.rows.filter((x) => x.case === 'M5')) assert.match(row.note ?? '', /^(\d+)\/\1 usable after$/);
      // The smoke run must not overwrite the published results.
      assert.doesNotMatch(r.stderr, /results written/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
