// Inline-cache misses per plain-HTTP request (M1's load) or per new tunnel (--case connect|socks5: M2's load):
// the daemon (`rotor start` as `npm start` runs it) or the minimal gateway behind the same squid and target runs
// with V8's `--log-ic`; after a warm-up second the measured part's IC events (each one a call from the code into
// V8's runtime: a miss, a transition, or a megamorphic stub-cache miss) are grouped by source position. A count
// per operation, which load does not move as it moves CPU time.
//
//   node --import tsx bench/ic.ts [--minimal] [--case M1|connect|socks5] [--seconds 3] [--top 40] [--root DIR] [--all] [--log FILE]
//
// Prints IC events per operation by area (the build's src/, node's internals, node_modules) and the top sites:
// file:line:column (dist/ positions mapped back to src/ through the build's source maps), the IC kind, the
// property, the state transitions seen over the whole run (0 uninitialized, 1 monomorphic, P polymorphic,
// N megamorphic, ^ recomputed handler, . premonomorphic, X no feedback) and the events per operation in the
// measured part. --all lists sites of every area, not only those in the daemon's own code and node's internals.
// --log FILE: only parse an existing log (with --window START:END byte offsets and --ops N).
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { parseArgs } from 'node:util';
import { startLoggedGateway, v8LogFields as fields } from './case-gateway.ts';

const { values } = parseArgs({
  options: {
    minimal: { type: 'boolean', default: false },
    seconds: { type: 'string', default: '3' },
    top: { type: 'string', default: '40' },
    case: { type: 'string', default: 'M1' },
    root: { type: 'string' },
    all: { type: 'boolean', default: false },
    log: { type: 'string' },
    window: { type: 'string' },
    ops: { type: 'string' },
  },
});
const kind = values.case.toLowerCase();
if (kind !== 'm1' && kind !== 'connect' && kind !== 'socks5') throw new Error('--case is M1, connect or socks5');
const per = kind === 'm1' ? 'request' : 'tunnel';

interface Code {
  start: number;
  size: number;
  /** The script's URL or path, '' for builtins and stubs. */
  script: string;
  fn: string;
}

interface Site {
  area: string;
  where: string;
  ic: string;
  keys: Set<string>;
  transitions: string[];
  events: number;
  /** Events in the measured part. */
  measured: number;
}

/** Code objects by start address, with a sorted index rebuilt when it changed (events come in time order). */
class CodeMap {
  private readonly byStart = new Map<number, Code>();
  private sorted: number[] = [];
  private dirty = false;
  add(c: Code): void {
    this.byStart.set(c.start, c);
    this.dirty = true;
  }
  move(from: number, to: number): void {
    const c = this.byStart.get(from);
    if (c === undefined) return;
    this.byStart.delete(from);
    this.add({ ...c, start: to });
  }
  find(pc: number): Code | undefined {
    const exact = this.byStart.get(pc);
    if (exact !== undefined) return exact;
    if (this.dirty) {
      this.sorted = [...this.byStart.keys()].sort((a, b) => a - b);
      this.dirty = false;
    }
    let lo = 0;
    let hi = this.sorted.length - 1;
    let best = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.sorted[mid]! <= pc) {
        best = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    if (best < 0) return undefined;
    const c = this.byStart.get(this.sorted[best]!)!;
    return pc < c.start + c.size ? c : undefined;
  }
}

/** "name /path/file.js:12:3" or "name node:net:10:2" → the script part. */
function scriptOf(name: string): { fn: string; script: string } {
  const m = /^(.*?) ?((?:file:\/\/|node:|\/)[^ ]*):\d+:\d+$/.exec(name);
  return m === null ? { fn: name, script: '' } : { fn: m[1]!, script: m[2]!.replace(/^file:\/\//, '') };
}

const maps = new Map<string, SourceMap | null>();
/** A dist/ position (1-based line, column as logged) as its src/ position, when the build has a source map. */
function original(script: string, line: number, column: number): string {
  let map = maps.get(script);
  if (map === undefined) {
    map = null;
    if (script.endsWith('.js') && existsSync(`${script}.map`)) {
      try {
        map = new SourceMap(JSON.parse(readFileSync(`${script}.map`, 'utf8')) as ConstructorParameters<typeof SourceMap>[0]);
      } catch {
        map = null;
      }
    }
    maps.set(script, map);
  }
  const short = script.replace(/^.*\/(dist|node_modules|bench|src)\//, '$1/');
  if (map === null) return `${short}:${line}:${column}`;
  const e = map.findEntry(line - 1, column - 1) as { originalSource?: string; originalLine?: number; originalColumn?: number };
  if (e.originalSource === undefined) return `${short}:${line}:${column}`;
  return `${e.originalSource.replace(/^.*\/src\//, 'src/')}:${e.originalLine! + 1}:${e.originalColumn! + 1}`;
}

function areaOf(script: string): string {
  if (script === '') return 'builtins';
  if (script.startsWith('node:')) return 'node';
  if (script.includes('/node_modules/')) return 'node_modules';
  if (script.includes('/dist/') || script.includes('/src/')) return 'rotor';
  return 'other';
}

export function parseIcLog(text: string, from: number, to: number): { sites: Map<string, Site>; measured: Map<string, number> } {
  const codes = new CodeMap();
  const sites = new Map<string, Site>();
  const measured = new Map<string, number>();
  let offset = 0;
  for (const line of text.split('\n')) {
    const at = offset;
    offset += line.length + 1;
    const comma = line.indexOf(',');
    const type = line.slice(0, comma);
    if (type === 'code-creation') {
      const f = fields(line);
      // code-creation,kind,kindNo,time,start,size,name[,sfi,state]
      const { fn, script } = scriptOf(f[6] ?? '');
      codes.add({ start: Number(f[4]), size: Number(f[5]), script, fn });
      continue;
    }
    if (type === 'code-move') {
      const f = line.split(',');
      codes.move(Number(f[1]), Number(f[2]));
      continue;
    }
    if (!type.endsWith('IC')) continue;
    // KIND,pc,time,line,column,old,new,map,key,modifier,slow_reason
    const f = fields(line);
    const code = codes.find(Number(f[1]));
    const script = code?.script ?? '';
    const area = areaOf(script);
    const where = script === '' ? `(${code?.fn ?? 'unknown code'})` : original(script, Number(f[3]), Number(f[4]));
    const id = `${type} ${where}`;
    let site = sites.get(id);
    if (site === undefined) {
      site = { area, where, ic: type, keys: new Set(), transitions: [], events: 0, measured: 0 };
      sites.set(id, site);
    }
    const step = `${f[5]}→${f[6]}`;
    if (site.transitions[site.transitions.length - 1] !== step && site.transitions.length < 12) site.transitions.push(step);
    if (site.keys.size < 6 && f[8] !== undefined && f[8] !== '') site.keys.add(f[8]);
    site.events++;
    if (at >= from && at < to) {
      site.measured++;
      measured.set(area, (measured.get(area) ?? 0) + 1);
    }
  }
  return { sites, measured };
}

function report(text: string, from: number, to: number, ops: number, label: string): void {
  const { sites, measured } = parseIcLog(text, from, to);
  const total = [...measured.values()].reduce((a, b) => a + b, 0);
  process.stdout.write(`${label}: ${ops} ${per}s (${kind}), ${(total / ops).toFixed(2)} IC events per ${per}\n`);
  for (const [area, n] of [...measured].sort((a, b) => b[1] - a[1])) {
    process.stdout.write(`  ${area.padEnd(13)} ${(n / ops).toFixed(2)} per ${per}\n`);
  }
  const shown = [...sites.values()]
    .filter((s) => s.measured > 0 && (values.all || s.area === 'rotor' || s.area === 'node'))
    .sort((a, b) => b.measured - a.measured)
    .slice(0, Number(values.top));
  process.stdout.write(`-- sites by events per ${per} in the measured part (transitions over the whole run)\n`);
  for (const s of shown) {
    process.stdout.write(
      `${(s.measured / ops).toFixed(3).padStart(7)}  ${s.ic.padEnd(13)} ${s.where}  [${[...s.keys].join(' ')}]  ${s.transitions.join(' ')}\n`,
    );
  }
  const poly = [...sites.values()].filter(
    (s) => s.area === 'rotor' && s.transitions.some((t) => t.endsWith('P') || t.endsWith('N')) && s.measured === 0,
  );
  if (poly.length > 0) {
    process.stdout.write(`-- the daemon's own polymorphic/megamorphic sites with no event in the measured part (settled)\n`);
    for (const s of poly.slice(0, Number(values.top))) {
      process.stdout.write(`         ${s.ic.padEnd(13)} ${s.where}  [${[...s.keys].join(' ')}]  ${s.transitions.join(' ')}\n`);
    }
  }
}

if (values.log !== undefined) {
  const text = readFileSync(values.log, 'utf8');
  const [a, b] = (values.window ?? `0:${text.length}`).split(':').map(Number);
  report(text, a!, b!, Number(values.ops ?? 1), values.log);
  process.exit(0);
}

/** The case's load through the gateway for `seconds`: operations completed. */
const { gateway, load, stop, logFile, dir } = await startLoggedGateway({
  minimal: values.minimal,
  root: values.root,
  kind,
  logFlags: ['--log-ic'],
  dirPrefix: 'rotor-ic-',
});

try {
  await load(1);
  // V8 writes its log through a buffered stream: the offsets are exact to a buffer's size, a few events.
  const from = statSync(logFile).size;
  const ops = await load(Number(values.seconds));
  const to = statSync(logFile).size;
  await gateway.stop();
  report(readFileSync(logFile, 'utf8'), from, to, ops, values.minimal ? 'minimal gateway' : 'rotor start');
  if (process.env.ROTOR_IC_KEEP === '1') {
    process.stdout.write(`(log kept: node --import tsx bench/ic.ts --case ${kind} --log ${logFile} --window ${from}:${to} --ops ${ops})\n`);
  }
} finally {
  await stop();
  // Worker threads' isolates (the password hashers) log beside the working directory, one file each.
  for (const f of readdirSync('.')) if (new RegExp(`^isolate-0x[0-9a-f]+-${gateway.pid}-v8\\.log$`).test(f)) rmSync(f, { force: true });
  if (process.env.ROTOR_IC_KEEP !== '1') rmSync(dir, { recursive: true, force: true });
}
