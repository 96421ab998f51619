// The folder order docs/architecture.md declares ("The dependency rule"), read from the document so the map and
// the tests that hold the code to it cannot drift apart.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

/**
 * The levels a docs/architecture.md text declares, top first: each line of the fenced block after "## The
 * dependency rule", up to its `→` or its description (two spaces or more); undefined when it has none.
 */
export function parseDependencyRule(doc: string): string[][] | undefined {
  const at = doc.indexOf('## The dependency rule');
  const block = at < 0 ? null : /```[a-z]*\n([\s\S]*?)```/.exec(doc.slice(at));
  if (!block) return undefined;
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

/** This checkout's declared levels, top first. */
export function declaredLevels(): string[][] {
  const levels = parseDependencyRule(readFileSync('docs/architecture.md', 'utf8'));
  assert.ok(levels, 'docs/architecture.md has no fenced block under "## The dependency rule"');
  return levels;
}

/** The folders at `folder`'s level and below it. */
export function atOrBelow(folder: string): Set<string> {
  const levels = declaredLevels();
  const at = levels.findIndex((names) => names.includes(folder));
  assert.ok(at >= 0, `${folder} is not in the order`);
  return new Set(levels.slice(at).flat());
}
