// The request rules' body-pattern guard (src/proxy/request-rules-pattern.ts) must read a pattern as V8 does
// (no `u`/`v` flag; the pattern is compiled with `i` only): `[]` and `[^]` are whole classes, the first
// unescaped ']' ends a class, '[' inside one is a member. A gap between the reader and the engine lets an
// exponential pattern through (`[^](a|a){0,15}]` was costed as one class: one 8 KiB page then held the event
// loop ~4 s). Deterministic cases name the syntax; a generated corpus matches every accepted pattern against
// hostile bodies and bounds the CPU time of each match.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bodyPatternProblem, compileBodyPattern } from '../../src/proxy/request-rules-pattern.ts';

const BYTES = 8192;
const problem = (p: string): string | undefined => bodyPatternProblem(p, BYTES);
const accepted = (p: string): void => assert.equal(problem(p), undefined, `${p} accepted`);
const refused = (p: string, why: RegExp): void => {
  const msg = problem(p);
  assert.ok(msg !== undefined, `${p} refused`);
  assert.match(msg, why, p);
};
/** The ways the reader counted, read from its "too costly" message (bodyBytes 2^23: one way is too many). */
const ways = (p: string): number => {
  const msg = bodyPatternProblem(p, 8 * 1024 * 1024 + 1);
  const m = /too costly: (\d+) ways/.exec(msg ?? '');
  assert.ok(m, `${p}: ${msg}`);
  return Number(m[1]);
};

test('[] and [^] are whole classes: what follows them up to a later ] is costed as pattern', () => {
  refused('[^](a|a){0,15}]', /too costly|cannot read/);
  refused('[]|(a|a){0,15}]', /too costly|cannot read/);
  refused('[^](?:a|a){0,15}]', /too costly/); // a non-capturing group: no group count can see it, the reader must
  refused('[].{0,1000}.{0,1000}]', /too costly/);
  refused('[^]]{0,15}(a|a){0,15}', /too costly/);
  // What stays cheap is accepted and costed as JavaScript reads it.
  accepted('[^]{0,64}captcha');
  accepted('[]|captcha');
  accepted('[]]'); // an empty class, then a literal ']'
  assert.equal(ways('[^]{0,64}'), 65);
  assert.equal(ways('[^](a|b)]'), 2, '[^] one way, (a|b) two, the ] a literal');
  assert.equal(ways('[]x|y'), 2);
});

test('escapes inside classes, ] escaped, [ and other metacharacters as members', () => {
  assert.equal(ways('[\\]]{0,9}'), 10, '\\] does not end the class');
  assert.equal(ways('[^\\]]{0,9}'), 10);
  assert.equal(ways('[\\\\](a|b)'), 2, 'an escaped backslash, then the class ends');
  assert.equal(ways('[(|)]{0,9}'), 10, 'parentheses and | inside a class are members');
  assert.equal(ways('[[]{0,9}'), 10, '[ inside a class is a member: no nesting without the v flag');
  assert.equal(ways('[a-z\\d\\s]{0,9}'), 10);
  assert.equal(ways('\\[(a|b)\\]'), 2, 'escaped brackets outside a class are literals');
  assert.equal(ways('\\\\(a|b){0,3}'), 15, 'an escaped backslash, then a real group');
  refused('\\\\(a|a){0,15}', /too costly/);
  refused('[a-\\]]', /not a valid regular expression/);
  refused('[abc', /not a valid regular expression/);
});

test('backreferences, lookarounds, named groups and flags', () => {
  refused('(a)\\1', /backreference/);
  refused('(?<n>a)\\k<n>', /backreference/);
  for (const p of ['x(?=y)', 'x(?!y)', '(?<=y)x', '(?<!y)x', '(?=a){2}']) refused(p, /lookaround/);
  assert.equal(ways('(?<word>a|b|c){0,2}'), 13, 'a named group is costed like a group');
  refused('(?<n>a|a){0,15}', /too costly/);
  assert.equal(ways('(?:a|b){0,2}'), 7);
  // A pattern is a source string compiled with `i` only: `/.../u` written out is a literal slash, not a flag.
  assert.equal(compileBodyPattern('a').flags, 'i');
  const property = compileBodyPattern('\\p{L}');
  assert.ok(property.test('p{L}') && !property.test('x'), 'no u flag: \\p{L} is the literal p{L}, not a property escape');
  refused('\\p{L}', /malformed/);
});

test('a generated corpus: every pattern the guard accepts matches hostile bodies in bounded CPU time', () => {
  // Pieces that mislead a reader that takes ']' after '[' or '[^' as a member, and pieces a misread would hide.
  const pieces = ['[]', '[^]', '[\\]]', ']', '[', '\\', '(a|a){0,15}', '(?:a|a){0,15}', '.{0,1000}', 'a{0,1000}', '|', '(', ')'];
  const bodies = ['a'.repeat(BYTES), `${'a'.repeat(BYTES - 1)}]`, '(|)]'.repeat(BYTES / 4)];
  const patterns = new Set<string>();
  for (const a of pieces) for (const b of pieces) for (const c of pieces) patterns.add(a + b + c);
  let acceptedCount = 0;
  let worstMs = 0;
  let worst = '';
  for (const p of patterns) {
    if (problem(p) !== undefined) continue;
    acceptedCount++;
    const re = compileBodyPattern(p);
    for (const body of bodies) {
      const before = process.cpuUsage();
      re.test(body);
      const used = process.cpuUsage(before);
      const ms = (used.user + used.system) / 1000;
      if (ms > worstMs) [worstMs, worst] = [ms, p];
      // An accepted pattern costs at most 2^23 steps over 8 KiB (~50 ms); an exponential one seconds.
      assert.ok(ms < 1000, `accepted pattern ${p} took ${ms.toFixed(0)} ms of CPU on one ${BYTES} B body`);
    }
  }
  assert.ok(acceptedCount > 200, `the corpus exercises the reader (${acceptedCount} of ${patterns.size} accepted)`);
  assert.ok(worstMs < 1000, `worst ${worst}: ${worstMs} ms`);
});
