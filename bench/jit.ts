// Optimizing compilations and deoptimizations per operation while a gateway runs steady: the daemon
// (`rotor start` as `npm start` runs it) or the minimal gateway, behind the same squid, microsocks and target,
// under V8's code log (--log-code --log-deopt). After the warm-up, each window's TurboFan and Maglev code
// creations and deoptimizations are counted and the functions compiled more than once are listed: a function
// the compiler keeps optimizing in steady state (a deoptimization loop, or code thrown away and rebuilt) costs the
// compiler's thread CPU on every operation.
//
// `--case connect,socks5` takes turns as bench/ab.ts's rounds do (each case warmed for --warmup seconds, then one
// window of each in turn): code that one protocol's shapes throw away and the other's compile again shows there.
// `--turns N` repeats the warm-up's turn over the cases N times; `--idle S` leaves the gateway without load for S
// seconds before each window (bench/ab.ts's gateways idle while the others run their rounds). ROTOR_JIT_FLAGS adds
// node options (e.g. "--log-maps --log-maps-details"); ROTOR_JIT_KEEP=1 keeps the V8 log.
//
//   node --import tsx bench/jit.ts [--minimal] [--case M1|connect|socks5[,…]] [--warmup 10] [--turns 1] [--idle 0] [--windows 4] [--seconds 5] [--top 25] [--root DIR]
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startCaseGateway, v8LogFields as fields } from './case-gateway.ts';

const { values } = parseArgs({
  options: {
    minimal: { type: 'boolean', default: false },
    case: { type: 'string', default: 'connect' },
    warmup: { type: 'string', default: '10' },
    windows: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '5' },
    top: { type: 'string', default: '25' },
    root: { type: 'string' },
    idle: { type: 'string', default: '0' },
    turns: { type: 'string', default: '1' },
  },
});
const kinds = values.case.toLowerCase().split(',');
for (const kind of kinds)
  if (kind !== 'm1' && kind !== 'connect' && kind !== 'socks5') throw new Error('--case is M1, connect or socks5 (or a list)');

interface Window {
  kind: string;
  ops: number;
  optimized: number;
  /** machine code bytes of those objects: the compiler's work grows with it */
  bytes: number;
  deopts: number;
  byFunction: Map<string, number>;
  deoptReasons: Map<string, number>;
}

function count(text: string, kind: string, ops: number): Window {
  const w: Window = { kind, ops, optimized: 0, bytes: 0, deopts: 0, byFunction: new Map(), deoptReasons: new Map() };
  for (const line of text.split('\n')) {
    if (line.startsWith('code-creation,')) {
      const f = fields(line);
      // code-creation,JS,kind,time,start,size,name,sfi,tier: tier '*' TurboFan, '+' Maglev.
      const tier = f[8] ?? '';
      if (f[1] !== 'JS' || (tier !== '*' && tier !== '+')) continue;
      w.optimized++;
      w.bytes += Number(f[5] ?? 0);
      const name = (f[6] ?? '').replace(/file:\/\/.*?\/(dist|src|node_modules)\//, '$1/');
      w.byFunction.set(name, (w.byFunction.get(name) ?? 0) + 1);
    } else if (line.startsWith('code-deopt,')) {
      const f = fields(line);
      w.deopts++;
      // code-deopt,time,size,code,inlining,offset,bailout,<position>,reason
      const where = `${(f[7] ?? '').replace(/file:\/\/.*?\/(dist|src|node_modules)\//, '$1/')} ${f[8] ?? ''}`;
      w.deoptReasons.set(where, (w.deoptReasons.get(where) ?? 0) + 1);
    }
  }
  return w;
}

const dir = mkdtempSync(join(tmpdir(), 'rotor-jit-'));
const logFile = join(dir, 'v8.log');
const { gateway, load, stop } = await startCaseGateway({
  minimal: values.minimal,
  ...(values.root !== undefined ? { root: values.root } : {}),
  nodeFlags: [
    '--log-code',
    '--log-deopt',
    `--logfile=${logFile}`,
    '--no-logfile-per-isolate',
    ...(process.env.ROTOR_JIT_FLAGS ?? '').split(' ').filter((f) => f !== ''),
  ],
});
try {
  for (let t = 0; t < Number(values.turns); t++) for (const kind of kinds) await load(kind, Number(values.warmup));
  const windows: Window[] = [];
  for (let i = 0; i < Number(values.windows); i++) {
    const kind = kinds[i % kinds.length]!;
    if (Number(values.idle) > 0) await new Promise((r) => setTimeout(r, Number(values.idle) * 1000));
    const from = statSync(logFile).size;
    const ops = await load(kind, Number(values.seconds));
    const to = statSync(logFile).size;
    windows.push(count(readFileSync(logFile).subarray(from, to).toString('utf8'), kind, ops));
  }
  const label = values.minimal ? 'minimal gateway' : 'rotor start';
  process.stdout.write(`${label}, --case ${kinds.join(',')}, after ${values.warmup} s of warm-up of each:\n`);
  for (const [i, w] of windows.entries()) {
    const per = w.kind === 'm1' ? 'request' : 'tunnel';
    process.stdout.write(
      `  window ${i + 1} (${w.kind}): ${w.ops} ${per}s, ${w.optimized} optimized code objects (${((1000 * w.optimized) / w.ops).toFixed(2)} per 1,000, ${(w.bytes / w.ops).toFixed(1)} code bytes per ${per}), ${w.deopts} deoptimizations\n`,
    );
  }
  const sum = (pick: (w: Window) => number): number => windows.reduce((a, w) => a + pick(w), 0);
  const ops = sum((w) => w.ops);
  process.stdout.write(
    `  all windows: ${ops} operations, ${((1000 * sum((w) => w.optimized)) / ops).toFixed(2)} optimized code objects and ${((1000 * sum((w) => w.deopts)) / ops).toFixed(2)} deoptimizations per 1,000, ${(sum((w) => w.bytes) / ops).toFixed(1)} code bytes per operation\n`,
  );
  const all = new Map<string, number>();
  const reasons = new Map<string, number>();
  for (const w of windows) {
    for (const [k, v] of w.byFunction) all.set(k, (all.get(k) ?? 0) + v);
    for (const [k, v] of w.deoptReasons) reasons.set(k, (reasons.get(k) ?? 0) + v);
  }
  const top = Number(values.top);
  process.stdout.write('  compiled in the windows (count, function):\n');
  for (const [k, v] of [...all].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`    ${String(v).padStart(5)}  ${k}\n`);
  process.stdout.write('  deoptimized in the windows (count, function and reason):\n');
  for (const [k, v] of [...reasons].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`    ${String(v).padStart(5)}  ${k}\n`);
} finally {
  await stop();
  for (const f of readdirSync('.')) if (new RegExp(`^isolate-0x[0-9a-f]+-${gateway.pid}-v8\\.log$`).test(f)) rmSync(f, { force: true });
  if (process.env.ROTOR_JIT_KEEP === '1') process.stdout.write(`(log kept: ${logFile})\n`);
  else rmSync(dir, { recursive: true, force: true });
}
