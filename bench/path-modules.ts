// The modules of src/ whose code runs for one SOCKS5 connection and for one plain-HTTP request, read from V8's
// precise coverage (function call counts): what docs/architecture.md "As it runs" counts. A real daemon in
// this process (the sandbox platform embedded), a loopback target, a client socket of this process (test/
// code is not src/, so not listed). Each path is a new client connection of a user already served (its pool
// holds nodes, its login was verified once); each is run --rounds times and only what ran in every round is
// listed, so a daemon timer that fired during one round falls out. Folders in --ignore (default the sandbox,
// which the daemon embeds here) are left out. Measured by test/support/path-modules.ts.
// Then the control's own count (test/support/control-path.ts, also bench/control-path.ts): the modules that
// hand control on (call into another module) and the calls that climb, from a breakpoint on every function
// the connection runs, and the chain of modules on the stack where the upstream dial begins and where the
// relay starts (warm upstream connections off, so the dial opens one).
//
//   node --import tsx bench/path-modules.ts [--rounds 3] [--functions] [--ignore sim]
import { parseArgs } from 'node:util';
import { measurePaths, type Ran } from '../test/support/path-modules.ts';
import { declaredOrder, measureControl, SRC_DIR, type ControlCalls, type ControlPath } from '../test/support/control-path.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    functions: { type: 'boolean', default: false },
    ignore: { type: 'string', default: 'sim' },
  },
});

function print(title: string, modules: Ran): void {
  const files = [...modules.keys()].sort();
  console.log(`\n${title}: ${files.length} modules`);
  for (const f of files) console.log(values.functions ? `  ${f}: ${[...modules.get(f)!].join(', ')}` : `  ${f}`);
}

const rounds = Number(values.rounds);
const { socks5, http } = await measurePaths(rounds, new Set(values.ignore.split(',').filter((f) => f !== '')));
print(`SOCKS5 connection (a new client connection of a user already served; in all ${rounds} rounds)`, socks5);
print(`plain-HTTP request (a new client connection of a user already served; in all ${rounds} rounds)`, http);

const order = declaredOrder('docs/architecture.md');
const control = await measureControl({ srcDir: SRC_DIR, config: { pool: { warm: { perNode: 0 } } }, ...(order ? { order } : {}) });
function printControl(title: string, p: ControlPath, c: ControlCalls): void {
  console.log(`\n${title}, by control:`);
  console.log(`  every call: ${c.modules.length} modules entered, ${c.handing.length} hand control on, ${c.climbs.length} climbs`);
  console.log(`    hand on: ${c.handing.join(', ')}`);
  for (const climb of c.climbs) console.log(`    climb: ${climb}`);
  console.log(`  on the stack at the dial and at the relay: ${p.modules} modules, ${p.climbs.length} climbs`);
  for (const [name, chain] of Object.entries(p.chains)) console.log(`    at ${name}: ${chain.join(' → ').replaceAll(' → ⇢ → ', ' ⇢ ')}`);
}
printControl('SOCKS5 connection', control.socks5, control.socks5Calls);
printControl('plain-HTTP request', control.http, control.httpCalls);
