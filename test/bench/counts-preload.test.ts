// bench/counts-preload.mjs: with ROTOR_COUNTS_SITES=1 (bench/counts.ts --promise-sites) each promise is also
// counted by the frames outside node's modules that made it; without it only the per-type counts are written.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import assert from 'node:assert/strict';

const PRELOAD = resolve('bench/counts-preload.mjs');
// Three promises from one named function, then a wait past the preload's 100 ms write.
const SCRIPT = 'function makeThree(){for(let i=0;i<3;i++)new Promise(()=>{})}makeThree();setTimeout(()=>{},400)';

async function counts(sites: boolean): Promise<Record<string, number>> {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-counts-'));
  try {
    const file = join(dir, 'counts.json');
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, ROTOR_COUNTS_FILE: file, ...(sites ? { ROTOR_COUNTS_SITES: '1' } : {}) };
    await promisify(execFile)(process.execPath, ['--import', PRELOAD, '-e', SCRIPT], { env });
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('promises are counted by the function that made them only with ROTOR_COUNTS_SITES=1', async () => {
  const withSites = await counts(true);
  const site = Object.entries(withSites).filter(([k]) => k.startsWith('promise at ') && k.includes('makeThree'));
  assert.equal(
    site.reduce((a, [, v]) => a + v, 0),
    3,
    JSON.stringify(withSites),
  );
  assert.ok((withSites['async PROMISE'] ?? 0) >= 3);
  const without = await counts(false);
  assert.ok((without['async PROMISE'] ?? 0) >= 3);
  assert.deepEqual(
    Object.keys(without).filter((k) => k.startsWith('promise at ')),
    [],
  );
});
