// The modules of src/ whose code runs for one SOCKS5 connection and for one plain-HTTP request, read from V8's
// precise coverage (function call counts): what docs/architecture.md "As it runs" counts. A real daemon in
// this process (the sandbox platform embedded), a loopback target, a client socket of this process (test/
// code is not src/, so not listed). Each path is a new client connection of a user already served (its pool
// holds nodes, its login was verified once); each is run --rounds times and only what ran in every round is
// listed, so a daemon timer that fired during one round falls out. Folders in --ignore (default the sandbox,
// which the daemon embeds here) are left out. Measured by test/support/path-modules.ts.
//
//   node --import tsx bench/path-modules.ts [--rounds 3] [--functions] [--ignore sim]
import { parseArgs } from 'node:util';
import { measurePaths, type Ran } from '../test/support/path-modules.ts';

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
