// process.nextTick's tick object literal stays monomorphic across a full collection that finds no tick object
// alive once the daemon keeps one (src/startup/tick-maps.ts); without it V8 turns the literal's feedback
// megamorphic for good (~9 µs per tunnel, docs/benchmarks.md "process.nextTick's maps"). Read from V8's own
// print of the feedback in a child run with --allow-natives-syntax.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import assert from 'node:assert/strict';

const CHILD = fileURLToPath(new URL('./tick-maps-child.ts', import.meta.url));

function literalStates(mode: 'keep' | 'none'): { states: string[]; same: string | undefined } {
  // V8 prints with C stdio: onto a file, since a pipe from node is a non-blocking socket that drops the tail.
  const dir = mkdtempSync(join(tmpdir(), 'rotor-tick-maps-'));
  try {
    const fd = openSync(join(dir, 'out.txt'), 'w');
    try {
      execFileSync(process.execPath, ['--allow-natives-syntax', '--expose-gc', '--import', 'tsx', CHILD, mode], {
        stdio: ['ignore', fd, 'inherit'],
      });
    } finally {
      closeSync(fd);
    }
    const out = readFileSync(join(dir, 'out.txt'), 'utf8');
    const printed = out.slice(out.indexOf('@@STATES'));
    return {
      states: [...printed.matchAll(/DefineKeyedOwnPropertyInLiteral (\w+)/g)].map((m) => m[1]!),
      same: /@@SAME (\w+)/.exec(out)?.[1],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('with an object of its maps kept, the literal stays monomorphic across a full collection', () => {
  const { states, same } = literalStates('keep');
  assert.deepEqual(states, ['MONOMORPHIC', 'MONOMORPHIC', 'MONOMORPHIC', 'MONOMORPHIC']);
  assert.equal(same, 'true', 'the kept object has the map of a tick object');
});

test('without it the same collection turns the literal megamorphic (what the daemon had)', () => {
  const { states } = literalStates('none');
  assert.equal(states.length, 4, states.join(' '));
  assert.ok(states.includes('MEGAMORPHIC'), states.join(' '));
});
