// A resume's ready write that landed in the store although the daemon saw it fail: a Redis script runs to its
// end while the client's command timeout (1 s by default, src/store/redis-connection.ts) rejects its promise,
// and a resume writes up to 1,000 records in one such script. The resume logs "the next sweep resumes them";
// the next sweep reads each record again, finds it ready, and must take it as stored: otherwise the users stay
// 'creating' in this daemon (refused at the proxy, listed as creating) until it restarts. Against a real sandbox
// over HTTP and a real SQLite file, whose putUsers here commits, then rejects as a timed-out Redis call does.
import { after, test } from 'node:test';
import { sandboxClient, startSandboxUsers } from '../support/sandbox-users.ts';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimulator, SIM_PRODUCTS } from '../../src/sim/index.ts';
import { StoreUnavailableError } from '../../src/store/errors.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { UserWrite } from '../../src/store/types.ts';
import { importIntoStore } from '../../src/users/store-import.ts';

const dir = mkdtempSync(join(tmpdir(), 'rotor-resume-landed-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A store whose next ready write commits and then fails, as a Redis script outliving its command timeout. */
class LandedThenFailed extends SqliteStore {
  failNextReady = true;
  override async putUsers(writes: readonly UserWrite[]) {
    const out = await super.putUsers(writes);
    if (this.failNextReady && writes.some((w) => w.user.state === 'ready')) {
      this.failNextReady = false;
      throw new StoreUnavailableError('users: command timed out');
    }
    return out;
  }
}

test('a ready write that landed but was seen failed: the next sweep takes the users as stored', async () => {
  const sim = await startSimulator({ latencyMs: 0, upstreams: false });
  const file = join(dir, 'landed.db');
  const client = sandboxClient(sim, { retries: 2 });
  try {
    const seed = new SqliteStore(file);
    const rows = ['w0', 'w1', 'w2'].map((name) => ({ name, mainAccount: 'shop1', product: SIM_PRODUCTS.dynamicTraffic }));
    await importIntoStore(seed, rows, { reservedPorts: new Map(), configUsers: [], tls: false });
    await seed.close();

    const store = new LandedThenFailed(file);
    const { users, close } = await startSandboxUsers(client, store);
    try {
      await users.resume(); // the start's resume: its write landed, then failed
      assert.equal(store.failNextReady, false, 'the ready write was made');
      assert.equal((await store.getUser('w0'))?.state, 'ready', 'the store holds the user ready');
      await users.resume(); // the next sweep
      for (const name of ['w0', 'w1', 'w2']) {
        assert.equal(users.view(name)?.state, 'ready', `${name} as this daemon holds it`);
        assert.ok(users.get(name) !== undefined, `${name} served by the proxy`);
      }
    } finally {
      await close();
    }
  } finally {
    client.close();
    await sim.close();
  }
});
