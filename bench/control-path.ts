// The chain of modules that hold and hand on a SOCKS5 connection's and a plain-HTTP request's control, from
// accept to the upstream dial and to the relay (or the answer), and where it climbs back up: stacks taken at
// those two moments in a real daemon (test/support/control-path.ts). What docs/architecture.md "As it runs"
// calls the path's modules and climbs by control; bench/path-modules.ts lists every leaf helper that ran.
//
//   node --import tsx bench/control-path.ts [--warm] [--order docs/architecture.md|none]
//
// --warm keeps warm upstream connections on (pass it on a commit that has none: its config has no such key);
// --order names the document whose declared folder order judges a call between folders (default this
// checkout's docs/architecture.md; `none`, or a document without the block: the checkout's import graph).
import { parseArgs } from 'node:util';
import { declaredOrder, measureControl, SRC_DIR, type ControlCalls, type ControlPath } from '../test/support/control-path.ts';

const { values } = parseArgs({
  options: { warm: { type: 'boolean', default: false }, order: { type: 'string', default: 'docs/architecture.md' } },
});
const order = values.order === 'none' ? undefined : declaredOrder(values.order);
console.log(order ? `folders judged by the order declared in ${values.order}` : 'folders judged by the import graph');

function print(title: string, p: ControlPath): void {
  console.log(`\n${title}: ${p.modules} modules, ${p.climbs.length} climbs`);
  for (const [name, chain] of Object.entries(p.chains)) console.log(`  at ${name}: ${chain.join(' → ').replaceAll(' → ⇢ → ', ' ⇢ ')}`);
  for (const c of p.climbs) console.log(`  climb: ${c}`);
}

function printCalls(title: string, c: ControlCalls): void {
  console.log(
    `\n${title}, every call between modules: ${c.modules.length} modules entered, ${c.handing.length} handing control on, ${c.climbs.length} climbs`,
  );
  console.log(`  handing on: ${c.handing.join(', ')}`);
  console.log(`  leaves: ${c.modules.filter((m) => !c.handing.includes(m)).join(', ')}`);
  for (const s of c.steps) console.log(`  ${c.climbs.includes(s) ? 'CLIMB ' : ''}${s}`);
}

const { socks5, http, socks5Calls, httpCalls } = await measureControl(
  // A fresh upstream connection for the dial (no warm one taken): the same probe on every commit.
  { srcDir: SRC_DIR, config: values.warm ? {} : { pool: { warm: { perNode: 0 } } }, ...(order ? { order } : {}) },
);
print('SOCKS5 connection', socks5);
print('plain-HTTP request', http);
printCalls('SOCKS5 connection', socks5Calls);
printCalls('plain-HTTP request', httpCalls);
