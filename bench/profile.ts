// Summarises V8 .cpuprofile files (from `npm run bench -- --profile DIR`): self time per function and per
// file, so the cost of the data path can be read without a browser.
//
//   node --import tsx bench/profile.ts DIR_OR_FILE... [--top N] [--match TEXT]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { transformSync } from 'esbuild';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
  children?: number[];
}
export interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

function files(paths: string[]): string[] {
  return paths.flatMap((p) =>
    statSync(p).isDirectory()
      ? readdirSync(p)
          .filter((f) => f.endsWith('.cpuprofile'))
          .map((f) => join(p, f))
      : [p],
  );
}

function where(url: string): string {
  if (!url) return '(native)';
  const path = url.replace(/^file:\/\//, '');
  const nm = path.lastIndexOf('node_modules/');
  if (nm >= 0) return path.slice(nm + 'node_modules/'.length);
  if (path.startsWith('node:')) return path;
  return relative(process.cwd(), path);
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Generated [line][segment] = [column, original line] of a source map's mappings. */
function decodeMappings(mappings: string): Array<Array<[number, number]>> {
  const lines: Array<Array<[number, number]>> = [];
  let srcLine = 0;
  for (const text of mappings.split(';')) {
    const segs: Array<[number, number]> = [];
    let col = 0;
    for (const seg of text.split(',')) {
      if (!seg) continue;
      const values: number[] = [];
      let value = 0;
      let shift = 0;
      for (const ch of seg) {
        const digit = B64.indexOf(ch);
        value += (digit & 31) << shift;
        if (digit & 32) {
          shift += 5;
        } else {
          values.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = 0;
          shift = 0;
        }
      }
      col += values[0] ?? 0;
      if (values.length >= 4) {
        srcLine += values[2]!;
        segs.push([col, srcLine]);
      }
    }
    lines.push(segs);
  }
  return lines;
}

// tsx runs TypeScript through esbuild with minifyWhitespace, so profiles of .ts files say "line 1, column N".
// The same transform here yields the same columns, and its source map gives back the source line.
const maps = new Map<string, Array<Array<[number, number]>> | null>();
function sourceLine(url: string, line: number, column: number): number {
  const path = url.replace(/^file:\/\//, '');
  if (!/\.m?ts$/.test(path) || path.includes('node_modules')) return line + 1;
  let map = maps.get(path);
  if (map === undefined) {
    try {
      const out = transformSync(readFileSync(path, 'utf8'), {
        loader: 'ts',
        format: 'esm',
        target: `node${process.versions.node}`,
        sourcemap: 'external',
        sourcefile: path,
        minifyWhitespace: true,
        keepNames: true,
      });
      map = decodeMappings((JSON.parse(out.map) as { mappings: string }).mappings);
    } catch {
      map = null;
    }
    maps.set(path, map);
  }
  const segs = map?.[line];
  if (!segs || segs.length === 0) return line + 1;
  let best = segs[0]!;
  for (const seg of segs) {
    if (seg[0] > column) break;
    best = seg;
  }
  return best[1] + 1;
}

export function summarise(profile: Profile): { total: number; byFunction: Map<string, number>; byFile: Map<string, number> } {
  // Self time from samples and their time deltas (hitCount has no durations).
  const self = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + (deltas[i + 1] ?? deltas[i] ?? 0));
  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  for (const n of profile.nodes) {
    const us = self.get(n.id) ?? 0;
    if (!us) continue;
    total += us;
    const f = n.callFrame;
    const file = where(f.url);
    const name = `${f.functionName || '(anonymous)'} ${file}${f.url ? `:${sourceLine(f.url, f.lineNumber, f.columnNumber)}` : ''}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    byFile.set(file, (byFile.get(file) ?? 0) + us);
  }
  return { total, byFunction, byFile };
}

function top(map: Map<string, number>, total: number, n: number, match?: string): string[] {
  return [...map.entries()]
    .filter(([k]) => !match || k.includes(match))
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, us]) => `${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${k}`);
}

/** Self time of the functions named `name`, by the stack of callers above them (up to `depth` frames). */
function callers(profile: Profile, name: string, depth: number, n: number): string[] {
  const parent = new Map<number, Node>();
  const byId = new Map<number, Node>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const c of node.children ?? []) parent.set(c, node);
  }
  const self = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + (deltas[i + 1] ?? deltas[i] ?? 0));
  const label = (node: Node): string => {
    const f = node.callFrame;
    return `${f.functionName || '(anonymous)'} ${where(f.url)}${f.url ? `:${sourceLine(f.url, f.lineNumber, f.columnNumber)}` : ''}`;
  };
  const stacks = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    if (!label(node).startsWith(name)) continue;
    const us = self.get(node.id) ?? 0;
    if (!us) continue;
    total += us;
    const frames: string[] = [];
    for (let p = parent.get(node.id); p && frames.length < depth; p = parent.get(p.id)) frames.push(label(p));
    const key = frames.join('  <-  ');
    stacks.set(key, (stacks.get(key) ?? 0) + us);
  }
  return [`${(total / 1000).toFixed(0)} ms self in ${name}`, ...top(stacks, total, n)];
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      top: { type: 'string', default: '30' },
      match: { type: 'string' },
      callers: { type: 'string' },
      depth: { type: 'string', default: '6' },
    },
  });
  const n = Number(values.top);
  for (const file of files(positionals)) {
    const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
    const s = summarise(p);
    const idle = [...s.byFunction.entries()].filter(([k]) => k.startsWith('(idle)')).reduce((a, [, v]) => a + v, 0);
    if (values.callers) {
      process.stdout.write(`\n${file}: who calls ${values.callers}\n${callers(p, values.callers, Number(values.depth), n).join('\n')}\n`);
      continue;
    }
    process.stdout.write(
      `\n${file}: ${((p.endTime - p.startTime) / 1e6).toFixed(1)} s wall, ${((s.total - idle) / 1e6).toFixed(1)} s busy\n` +
        `-- by file\n${top(s.byFile, s.total, 15).join('\n')}\n-- by function\n${top(s.byFunction, s.total, n, values.match).join('\n')}\n`,
    );
  }
}

// Run as a command; bench/counts.ts --profile imports summarise() only.
if (process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/^.*\//, ''))) main();
