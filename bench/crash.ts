// Crash safety (issue 9, item 4): N cycles of an order and traffic workload against `rotor start` (remote mode,
// one sandbox in this process), each ended by a SIGKILL at a seeded random moment and a restart on the same
// store and ports. Prints the per-cycle figures and the exactly-once check of every order, writes them to
// docs/reliability.md (between the crash markers), and exits 1 when a check failed.
// The workload and what is measured: test/reliability/crash-workload.ts.
//
//   node --import tsx bench/crash.ts [--cycles 20] [--seed N] [--flush MS] [--no-doc]
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { crashSummary, crashTable, runCrashWorkload } from '../test/reliability/crash-workload.ts';

const DOC = join(dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'reliability.md');
const BEGIN = '<!-- crash:begin -->';
const END = '<!-- crash:end -->';

const { values } = parseArgs({
  options: {
    cycles: { type: 'string', default: '20' },
    seed: { type: 'string' },
    flush: { type: 'string', default: '500' },
    'no-doc': { type: 'boolean', default: false },
  },
});
const cycles = Number(values.cycles);
const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
const flushIntervalMs = Number(values.flush);
if (!(cycles > 0) || !Number.isInteger(seed) || !(flushIntervalMs > 0)) {
  console.error('usage: node --import tsx bench/crash.ts [--cycles N] [--seed N] [--flush MS] [--no-doc]');
  process.exit(2);
}
console.log(`crash: ${cycles} cycles, seed ${seed} (replay with --seed ${seed})`);

const report = await runCrashWorkload({ cycles, seed, flushIntervalMs, log: (l) => console.log(`crash: ${l}`) });
const table = crashTable(report);
const summary = crashSummary(report);
console.log(`\n${table}\n\n${summary}`);

if (!values['no-doc']) {
  const command = `node --import tsx bench/crash.ts --cycles ${cycles} --seed ${seed}${flushIntervalMs !== 500 ? ` --flush ${flushIntervalMs}` : ''}`;
  const block = [BEGIN, `Last run: \`${command}\` at ${new Date().toISOString()}.`, '', '```', summary, '```', '', table, END].join('\n');
  let text = readFileSync(DOC, 'utf8');
  const a = text.indexOf(BEGIN);
  const b = text.indexOf(END);
  text = a >= 0 && b > a ? text.slice(0, a) + block + text.slice(b + END.length) : `${text}\n## Crash figures\n\n${block}\n`;
  writeFileSync(DOC, text);
  console.log(`crash: figures written to ${DOC}`);
}
process.exit(report.failures.length === 0 ? 0 : 1);
