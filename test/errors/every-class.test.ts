// The catalogue as the modules define it, not as a list kept by hand: every error class src/ exports, and
// every class src/ throws, is a RotorError (a stable code and the answer it maps to). A new class that extends
// Error directly, or a `throw new Error(…)`, fails here without anyone having to add it to a table.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, test } from 'node:test';
import { RotorError } from '../../src/errors/rotor-error.ts';
// @ts-expect-error: a plain .mjs script without declarations
import { listFiles } from '../../scripts/files.mjs';

const SRC = resolve('src');
// The command line's entry point runs on import; it defines no error class of its own.
const ENTRY_POINTS = new Set(['cli.ts']);
const files = (listFiles(SRC, (name: string) => name.endsWith('.ts')) as string[]).filter((f) => !ENTRY_POINTS.has(relative(SRC, f)));

const isErrorClass = (value: unknown): value is new (...args: never[]) => Error =>
  typeof value === 'function' && value.prototype instanceof Error;

describe('the error catalogue, generated from src/', () => {
  test('every exported error class extends RotorError', async () => {
    const offenders: string[] = [];
    let seen = 0;
    for (const file of files) {
      const exports = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
      for (const [name, value] of Object.entries(exports)) {
        if (!isErrorClass(value) || value === RotorError) continue;
        seen++;
        if (!(value.prototype instanceof RotorError)) offenders.push(`${relative(SRC, file)}: ${name}`);
      }
    }
    assert.ok(seen >= 30, `only ${seen} error classes found: the walk over src/ is broken`);
    assert.deepEqual(offenders, [], 'these error classes do not extend RotorError');
  });

  test('every class thrown in src/ is a RotorError subclass', () => {
    // Class declarations anywhere in src/ (exported or not), so a chain can be followed by name.
    const parent = new Map<string, string>();
    const thrown: { name: string; at: string }[] = [];
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/\bclass\s+(\w+)(?:<[^>]*>)?\s+extends\s+(\w+)/g)) parent.set(m[1]!, m[2]!);
      const lines = text.split('\n');
      lines.forEach((line, i) => {
        for (const m of line.matchAll(/\bthrow\s+(?:Object\.assign\(\s*)?new\s+(\w+)/g))
          thrown.push({ name: m[1]!, at: `${relative(SRC, file)}:${i + 1}` });
      });
    }
    const isRotor = (name: string): boolean => {
      for (let n: string | undefined = name, hops = 0; n !== undefined && hops < 20; n = parent.get(n), hops++)
        if (n === 'RotorError') return true;
      return false;
    };
    assert.ok(thrown.length >= 50, `only ${thrown.length} throw sites found: the scan is broken`);
    const offenders = thrown.filter((t) => !isRotor(t.name)).map((t) => `${t.at}: throw new ${t.name}`);
    assert.deepEqual(offenders, [], 'these throws raise a class that is not a RotorError');
  });
});
