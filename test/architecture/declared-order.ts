// The folder order docs/architecture.md declares ("The dependency rule"), read from the document so the map and
// the tests that hold the code to it cannot drift apart.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

/** The declared levels, top first: each line of the fenced block after "## The dependency rule", up to its `→` or its description (two spaces or more). */
export function declaredLevels(): string[][] {
  const doc = readFileSync('docs/architecture.md', 'utf8');
  const section = doc.slice(doc.indexOf('## The dependency rule'));
  const block = /```[a-z]*\n([\s\S]*?)```/.exec(section);
  assert.ok(block, 'docs/architecture.md has no fenced block under "## The dependency rule"');
  return block[1]!
    .split('\n')
    .map((line) =>
      line
        .split('→')[0]!
        .split(/\s{2,}/)[0]!
        .trim(),
    )
    .filter((line) => line !== '')
    .map((line) => line.split(/,\s*/).map((f) => f.trim()));
}

/** The folders at `folder`'s level and below it. */
export function atOrBelow(folder: string): Set<string> {
  const levels = declaredLevels();
  const at = levels.findIndex((names) => names.includes(folder));
  assert.ok(at >= 0, `${folder} is not in the order`);
  return new Set(levels.slice(at).flat());
}
