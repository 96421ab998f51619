#!/usr/bin/env node
// The installed `rotor` command runs the compiled JavaScript in dist/ (built by `npm install`'s prepare
// script, `npm run build`). A checkout whose dist/ was never built still runs, through tsx, the way the
// tests and development do.
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/cli.js', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli.ts');
}
