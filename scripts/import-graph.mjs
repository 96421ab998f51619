#!/usr/bin/env node
// The import graph of src/ and the cycles in it. Every relative import counts, type-only ones included: a
// cycle of types is still two modules that cannot be understood (or moved) one without the other.
// Imports are read with TypeScript's own pre-processor (no regexes over source), so comments and strings
// never count. Run it to list the cycles (exit 1 when there is one); test/architecture/imports.test.ts runs
// it in the suite.
import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { listFiles } from './files.mjs';

/** file → the files it imports (relative imports of .ts files inside `root`). */
export function importGraph(root) {
  const files = listFiles(resolve(root), (name) => name.endsWith('.ts') && !name.endsWith('.d.ts'));
  const known = new Set(files);
  const graph = new Map();
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const targets = new Set();
    for (const ref of info.importedFiles) {
      if (!ref.fileName.startsWith('.')) continue;
      const target = resolve(dirname(file), ref.fileName);
      if (known.has(target)) targets.add(target);
    }
    graph.set(file, [...targets]);
  }
  return graph;
}

/** Strongly connected components of more than one file, or a file importing itself (Tarjan's algorithm). */
export function cycles(graph) {
  let index = 0;
  const stack = [];
  const on = new Set();
  const idx = new Map();
  const low = new Map();
  const found = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = process.argv[2] ?? 'src';
  const graph = importGraph(root);
  const found = cycles(graph);
  for (const c of found) console.log(`cycle: ${c.map((f) => relative(process.cwd(), f)).join(' ↔ ')}`);
  console.log(`${graph.size} modules, ${found.length} cycle(s)`);
  process.exit(found.length === 0 ? 0 : 1);
}
