// Listing the files of a folder tree, for the scripts (the test runner, the import-graph check).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Every file below `dir` whose name passes `wanted`, depth first. */
export function listFiles(dir, wanted) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...listFiles(p, wanted));
    else if (wanted(name)) out.push(p);
  }
  return out;
}
