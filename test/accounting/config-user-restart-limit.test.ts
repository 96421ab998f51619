// A config user made under a deleted customer's name counts under a key of its own (`<name>~<createdAt>`), and the
// deleted customer's rows stay as they were, for the bill. At a start the config users' limits must therefore be
// applied only once the users directory has said which key each one is: applied by plain name first, the config
// limit was written on the deleted customer's row (and stayed there). Real daemon on the embedded sandbox (the
// test store: SQLite, or Redis with ROTOR_TEST_STORE=redis), the restart path.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { curl, startGateway, viaHttp, type Gateway } from '../e2e/harness.ts';
import { startTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { poll } from '../support/wait.ts';
import { openTestStore } from '../support/store.ts';

const ALICE = { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', product: '', draw: 'pwd', sessTime: 5, limitBytes: -1 };
const MiB = 1024 * 1024;

let target: BytesTarget;
let dir: string;
before(async () => {
  target = await startTarget();
  dir = mkdtempSync(join(tmpdir(), 'rotor-config-restart-limit-'));
});
after(async () => {
  await target?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Row {
  usedBytes: number;
  limitBytes: number;
}

async function row(gw: Gateway, name: string): Promise<Row> {
  return (await gw.admin<Row>(`/v1/users/${name}`)).body;
}

/** The deleted customer's plain row as the store holds it once the daemon stopped. */
async function storedRow(path: string, name: string): Promise<{ usedBytes: number; limitBytes: number } | undefined> {
  const store = await openTestStore(path);
  try {
    return await store.getUsage(name);
  } finally {
    await store.close();
  }
}

test("a config user under a deleted customer's name: no start writes its limit on the deleted customer's row", async () => {
  const path = join(dir, 'restart.db');
  const base = { store: { path }, accounts: { flushIntervalMs: 100 } };
  const name = 'erin';
  let gw: Gateway | undefined = await startGateway({ config: { ...base, users: [ALICE] } });
  try {
    const api = { name, mainAccount: 'shop1', password: 'api-erin-first', quota: { bytes: 20 * MiB, period: 'total' } };
    assert.equal((await gw.admin('/v1/users', { body: api })).status, 201);
    const r = await curl([...viaHttp(gw.ports.http, name, api.password), target.url(100_000)]);
    assert.equal(r.exitCode, 0, r.stderr);
    const g = gw;
    const deletedUsed = await poll(
      async () => {
        const used = (await row(g, name)).usedBytes;
        return used >= 100_000 ? used : undefined;
      },
      { what: 'the API customer metered', timeoutMs: 10_000 },
    );
    assert.equal((await gw.admin(`/v1/users/${name}`, { method: 'DELETE' })).status, 204);
    await gw.close();
    gw = undefined;
    const before = await storedRow(path, name);
    assert.deepEqual([before?.usedBytes, before?.limitBytes], [deletedUsed, 20 * MiB]);

    // The name in the config at the next start (another customer), then its limit changed across a second start.
    for (const limitBytes of [50 * MiB, 70 * MiB]) {
      gw = await startGateway({
        config: { ...base, users: [ALICE, { name, password: 'config-erin-1', mainAccount: 'shop1', product: '', limitBytes }] },
      });
      const mine = await row(gw, name);
      assert.deepEqual([mine.usedBytes, mine.limitBytes], [0, limitBytes], 'the config user: its own usage, the config limit');
      await gw.close();
      gw = undefined;
      const deleted = await storedRow(path, name);
      assert.equal(deleted?.limitBytes, 20 * MiB, `the deleted customer's row holds limit ${deleted?.limitBytes} (its own: ${20 * MiB})`);
      assert.equal(deleted?.usedBytes, deletedUsed);
    }
  } finally {
    await gw?.close();
  }
});
