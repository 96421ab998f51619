// A reload (SIGHUP) seeds the config's users again. A config user whose password this process already verified
// against its stored hash (at the last seed, or at a proxy login) needs no scrypt: before, every reload made one
// check per config user on the hashing threads the customers' logins and portal sign-ins wait for (10,000 config
// users: 10,000 scrypts per reload). A changed password is still hashed, and only the new one logs in. Real
// daemon on the embedded sandbox; the scrypt computations counted at the process's one hash queue.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { hashQueue } from '../../src/admission/password.ts';
import { startGateway, testConfig, type Gateway } from '../e2e/harness.ts';
import { connectStatus } from '../support/connect-head.ts';
import { startTarget, type Target } from '../e2e/harness.ts';

const user = (name: string, password: string) => ({ name, password, mainAccount: 'shop1', product: '', limitBytes: -1 });
const USERS = Array.from({ length: 8 }, (_, i) => user(`cfg${i}`, `cfg${i}-pass`));

let gw: Gateway;
let target: Target;
before(async () => {
  gw = await startGateway({ config: { users: [user('alice', 'alice-pass'), ...USERS] } });
  target = await startTarget();
});
after(async () => {
  await gw?.close();
  await target?.close();
});

/** Scrypt computations (hashes and checks) run through the hash queue while `fn` runs. */
async function scrypts(fn: () => Promise<void>): Promise<number> {
  const run = hashQueue.run.bind(hashQueue);
  let n = 0;
  hashQueue.run = ((priority, work) => {
    n++;
    return run(priority, work);
  }) as typeof hashQueue.run;
  try {
    await fn();
  } finally {
    hashQueue.run = run;
  }
  return n;
}

test('a reload of unchanged config users costs no scrypt; a changed password is hashed and only it logs in', async () => {
  const same = testConfig({ ...gw.config, users: [user('alice', 'alice-pass'), ...USERS] } as never);
  const unchanged = await scrypts(() => gw.daemon.reload(same));
  assert.equal(unchanged, 0, `a reload of 9 unchanged config users ran ${unchanged} scrypt computations`);
  const changed = testConfig({ ...gw.config, users: [user('alice', 'alice-new-pass'), ...USERS] } as never);
  const rehashed = await scrypts(() => gw.daemon.reload(changed));
  assert.ok(rehashed >= 1 && rehashed <= 2, `a changed password: ${rehashed} scrypt computations`);
  assert.equal(await connectStatus(gw.ports.http, target.port, 'alice', 'alice-new-pass'), 200);
  assert.equal(await connectStatus(gw.ports.http, target.port, 'alice', 'alice-pass'), 407);
  // And back: the old password again is a change too (hashed, not taken from what was verified before).
  const back = await scrypts(() => gw.daemon.reload(same));
  assert.ok(back >= 1, `the old password back: ${back} scrypt computations`);
  assert.equal(await connectStatus(gw.ports.http, target.port, 'alice', 'alice-pass'), 200);
  assert.equal(await connectStatus(gw.ports.http, target.port, 'alice', 'alice-new-pass'), 407);
});
