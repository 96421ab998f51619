// Reads `perf record -g` files of gateways (bench/ab.ts --perf DIR) and gives CPU per operation side by side:
// each on-CPU sample of the main thread (the thread with most samples) is put in a bucket (a system call by its
// libc wrapper when the sample is in the kernel, the collector, the compiler, libc) or, for everything else, given
// to the first JavaScript frame on its stack (the builtins, IC stubs, V8 runtime and node C++ it called count for
// that function). Rows are sorted by how far the later files are from the first.
//
//   node --import tsx bench/perf-frames.ts [--top 40] [--all-threads] [--under TEXT] FILE:OPS [FILE:OPS ...]
//
// OPS: the operations the gateway completed while recorded (bench/ab.ts prints them). --under TEXT: instead, the
// self symbols of the samples whose first JavaScript frame contains TEXT.
import { execFileSync } from 'node:child_process';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '40' }, 'all-threads': { type: 'boolean', default: false }, under: { type: 'string' } },
});
if (positionals.length === 0) throw new Error('usage: bench/perf-frames.ts [--top N] FILE:OPS [FILE:OPS ...]');

interface Frame {
  sym: string;
  dso: string;
}
type Table = Map<string, number>;

function frame(line: string): Frame {
  const m = /^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)$/.exec(line);
  if (!m) return { sym: line.trim(), dso: '?' };
  return { sym: m[1]!.replace(/\+0x[0-9a-f]+$/, ''), dso: m[2]!.slice(m[2]!.lastIndexOf('/') + 1) };
}

function tables(file: string, ops: number): { buckets: Table; js: Table } {
  const out = execFileSync('perf', ['script', '-i', file, '-F', 'tid,period,ip,sym,dso'], { maxBuffer: 1 << 30, encoding: 'utf8' });
  const samples: Array<{ tid: string; period: number; frames: Frame[] }> = [];
  const perThread = new Map<string, number>();
  for (const block of out.split('\n\n')) {
    const lines = block.split('\n').filter((l) => l.trim() !== '');
    const head = lines[0]?.trim().split(/\s+/);
    if (!head || head.length < 2 || lines.length < 2) continue;
    const period = Number(head[1]);
    samples.push({ tid: head[0]!, period, frames: lines.slice(1).map(frame) });
    perThread.set(head[0]!, (perThread.get(head[0]!) ?? 0) + period);
  }
  const main = [...perThread].sort((a, b) => b[1] - a[1])[0]?.[0];
  const buckets: Table = new Map();
  const js: Table = new Map();
  const add = (t: Table, k: string, ns: number): void => void t.set(k, (t.get(k) ?? 0) + ns / 1000 / ops);
  for (const s of samples) {
    if (!values['all-threads'] && s.tid !== main) continue;
    const top = s.frames[0]!;
    const all = s.frames.map((f) => f.sym).join(' ');
    const firstJs =
      s.frames
        .find((f) => f.sym.startsWith('JS:'))
        ?.sym.replace(/^JS:[*^~]?/, '')
        .replace(/file:\/\/\/\S*?\/dist\//, 'dist/') ?? '(none)';
    if (values.under !== undefined) {
      if (firstJs.includes(values.under)) add(js, top.sym, s.period);
      continue;
    }
    if (top.dso === '[kernel.kallsyms]') {
      const wrapper =
        s.frames.find((f) => f.dso.startsWith('libc'))?.sym ?? s.frames.find((f) => f.dso !== '[kernel.kallsyms]')?.sym ?? '?';
      add(buckets, `kernel: ${wrapper}`, s.period);
    } else if (/Scaveng|Heap::CollectGarbage|MarkCompact|Sweeper|IncrementalMarking|ArrayBufferSweeper/.test(all)) {
      add(buckets, 'garbage collector', s.period);
    } else if (/compiler::|Compil|Deoptimizer/.test(all)) add(buckets, 'compiler', s.period);
    else if (top.dso.startsWith('libc') || top.dso.startsWith('libstdc')) add(buckets, `libc: ${top.sym}`, s.period);
    else {
      add(buckets, 'JavaScript and what it called (by first JS frame below)', s.period);
      add(js, firstJs, s.period);
    }
  }
  return { buckets, js };
}

const runs = positionals.map((p) => {
  const at = p.lastIndexOf(':');
  return { name: basename(p.slice(0, at)).replace(/\.data$/, ''), ...tables(p.slice(0, at), Number(p.slice(at + 1))) };
});
const print = (title: string, pick: (r: (typeof runs)[number]) => Table, n: number): void => {
  const keys = new Set(runs.flatMap((r) => [...pick(r).keys()]));
  const far = (k: string): number => Math.max(...runs.map((r) => Math.abs((pick(r).get(k) ?? 0) - (pick(runs[0]!).get(k) ?? 0))));
  const rows = [...keys].sort((a, b) => (runs.length > 1 ? far(b) - far(a) : (pick(runs[0]!).get(b) ?? 0) - (pick(runs[0]!).get(a) ?? 0)));
  const sum = (r: (typeof runs)[number]): number => [...pick(r).values()].reduce((a, b) => a + b, 0);
  process.stdout.write(`-- ${title}, µs per operation\n${runs.map((r) => r.name.slice(-14).padStart(15)).join('')}\n`);
  process.stdout.write(`${runs.map((r) => sum(r).toFixed(2).padStart(15)).join('')}  (all)\n`);
  for (const k of rows.slice(0, n))
    process.stdout.write(`${runs.map((r) => (pick(r).get(k) ?? 0).toFixed(2).padStart(15)).join('')}  ${k.slice(0, 120)}\n`);
};
if (values.under !== undefined) print(`self symbols under ${values.under}`, (r) => r.js, Number(values.top));
else {
  print(values['all-threads'] ? 'all threads' : 'main thread', (r) => r.buckets, 20);
  print('JavaScript by first JS frame', (r) => r.js, Number(values.top));
}
