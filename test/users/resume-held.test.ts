// A resume holds at most one set of finished creations being written and the next being made, whichever worker
// filled it: a store slower than the platform holds every worker back instead of queueing finished creations in
// memory (up to one set per worker: 64,000 at the default window). Against a real sandbox over HTTP and a real
// SQLite file whose ready writes each take 1.5 s (a slow store), 3,000 intents written as `rotor users import
// --store` writes them: at the start and end of each ready write, the creations the platform made that are not
// yet written stay within two sets and the steps in flight.
import { after, test } from 'node:test';
import { sandboxClient, startSandboxUsers } from '../support/sandbox-users.ts';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { UserWrite } from '../../src/store/types.ts';
import { importIntoStore } from '../../src/users/store-import.ts';

const INTENTS = 3000;
const SET = 1000; // src/users/directory.ts RESUME_WRITE_EVERY
const WINDOW = 64;

const dir = mkdtempSync(join(tmpdir(), 'rotor-resume-held-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Ready writes that take 1.5 s each; the most creations made on the platform and not yet written, seen at each. */
class SlowReadyWrites extends SqliteStore {
  written = 0;
  mostHeld = 0;
  constructor(
    file: string,
    private readonly made: () => number,
  ) {
    super(file);
  }
  private look(): void {
    this.mostHeld = Math.max(this.mostHeld, this.made() - this.written);
  }
  override async putUsers(writes: readonly UserWrite[]) {
    const ready = writes.filter((w) => w.user.state === 'ready').length;
    if (ready === 0) return super.putUsers(writes);
    this.look();
    await delay(1500); // the slow store itself, not a wait for something to happen
    this.look();
    const out = await super.putUsers(writes);
    this.written += ready;
    return out;
  }
}

test('a resume against a store slower than the platform holds at most two sets of finished creations', async () => {
  let sim: Simulator | undefined;
  let client: PlatformClient | undefined;
  try {
    sim = await startSimulator({ latencyMs: 0, upstreams: false });
    const s = sim;
    client = sandboxClient(s, { retries: 2 });
    const file = join(dir, 'held.db');
    const seed = new SqliteStore(file);
    const rows = Array.from({ length: INTENTS }, (_, i) => ({ name: `h${i}`, mainAccount: 'shop1', product: SIM_PRODUCTS.dynamicTraffic }));
    await importIntoStore(seed, rows, { reservedPorts: new Map(), configUsers: [], tls: false });
    await seed.close();

    const store = new SlowReadyWrites(file, () => s.inspect.calls().CreateProxyUser ?? 0);
    const { users, close } = await startSandboxUsers(client, store, { resumeConcurrency: WINDOW });
    try {
      await users.resume();
      assert.equal(store.written, INTENTS, 'every intent made ready');
      assert.equal(users.view(`h${INTENTS - 1}`)?.state, 'ready');
      // One set being written, the next made, the steps in flight when it filled (and the main account's own
      // creation calls).
      const bound = 2 * SET + WINDOW + 8;
      assert.ok(store.mostHeld <= bound, `${store.mostHeld} creations made and not written at once (bound ${bound})`);
    } finally {
      await close();
    }
  } finally {
    client?.close();
    await sim?.close();
  }
});
