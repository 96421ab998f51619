#!/usr/bin/env node
// Runs the whole suite with node's own test runner and tsx as the TypeScript loader.
// Node 20's --test takes no globs, so the files are listed here; pass paths or substrings to narrow.
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else if (name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

const filters = process.argv.slice(2);
const files = walk('test').sort().filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const child = spawn(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=120000', ...files],
  { stdio: 'inherit', env: { ...process.env, ROTOR_LOG_LEVEL: process.env.ROTOR_LOG_LEVEL ?? 'silent' } },
);
child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 1)));
