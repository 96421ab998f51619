// A config user taken out of the config by one reload and put back by the next (an edit and its revert, a typo
// fixed) is the same customer: it keeps counting under its usage key, so its earlier usage still counts against its
// quota, and a limit the operator set on it through the API stays. A name made again after DELETE /v1/users/:name
// is another customer (test/users/name-reuse-config.test.ts) — checked here in the same daemon for contrast.
// Real daemon on the embedded sandbox (SQLite), real curl through the HTTP listener, the reload's own path.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { curl, startGateway, testConfig, viaHttp, type Gateway } from '../e2e/harness.ts';
import { startTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { poll } from '../support/wait.ts';

const ALICE = { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', product: '', draw: 'pwd', sessTime: 5, limitBytes: -1 };
const BOB = { name: 'bob', password: 'bob-pass-123', mainAccount: 'shop1', product: '', draw: 'pwd', sessTime: 5, limitBytes: 1_000_000 };
const CAROL = {
  name: 'carol',
  password: 'carol-pass-1',
  mainAccount: 'shop1',
  product: '',
  draw: 'pwd',
  sessTime: 5,
  limitBytes: 5_000_000,
};

let target: BytesTarget;
let dir: string;
before(async () => {
  target = await startTarget();
  dir = mkdtempSync(join(tmpdir(), 'rotor-config-revert-'));
});
after(async () => {
  await target?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Row {
  usedBytes: number;
  limitBytes: number;
  createdAt: string;
}

async function row(gw: Gateway, name: string): Promise<Row> {
  return (await gw.admin<Row>(`/v1/users/${name}`)).body;
}

async function carry(gw: Gateway, u: { name: string; password: string }, bytes: number, atLeast: number): Promise<number> {
  const r = await curl([...viaHttp(gw.ports.http, u.name, u.password), target.url(bytes)]);
  assert.equal(r.exitCode, 0, r.stderr);
  return poll(
    async () => {
      const used = (await row(gw, u.name)).usedBytes;
      return used >= atLeast ? used : undefined;
    },
    { what: `${u.name} metered`, timeoutMs: 10_000 },
  );
}

test('a config user removed by a reload and put back by the next keeps its usage, its quota and its API limit', async () => {
  const gw = await startGateway({
    config: { store: { path: join(dir, 'r.db') }, accounts: { flushIntervalMs: 100 }, users: [ALICE, BOB, CAROL] },
  });
  try {
    const bobBefore = await carry(gw, BOB, 700_000, 700_000);
    const bobCreated = (await row(gw, 'bob')).createdAt;
    // carol: the operator's limit set through the API wins over the config's until the config's changes.
    assert.equal((await gw.admin('/v1/users/carol/limit', { method: 'PUT', body: { limitBytes: 3_000_000 } })).status, 200);
    const carolBefore = await carry(gw, CAROL, 200_000, 200_000);

    await gw.daemon.reload(testConfig({ ...gw.config, users: [ALICE] } as never));
    assert.equal((await gw.admin('/v1/users/bob')).status, 404, 'bob is gone while the config lacks it');
    await gw.daemon.reload(testConfig({ ...gw.config, users: [ALICE, BOB, CAROL] } as never));

    const bob = await row(gw, 'bob');
    assert.ok(bob.usedBytes >= bobBefore, `bob used ${bobBefore} B before the remove+revert reloads, ${bob.usedBytes} B after`);
    assert.equal(bob.createdAt, bobCreated, 'the same customer: its creation time is kept');
    const carol = await row(gw, 'carol');
    assert.ok(carol.usedBytes >= carolBefore, `carol used ${carolBefore} B before, ${carol.usedBytes} B after`);
    assert.equal(carol.limitBytes, 3_000_000, 'the limit set through the API stays on the same customer');

    // The quota holds: another 700,000 B would take bob to 1.4 MB of its 1,000,000 B.
    const again = await curl([...viaHttp(gw.ports.http, BOB.name, BOB.password), target.url(700_000)]);
    const after = await row(gw, 'bob');
    assert.ok(
      again.exitCode !== 0 || after.usedBytes <= 1_000_000 + 64 * 1024,
      `second transfer exit ${again.exitCode}, ${after.usedBytes} B used`,
    );
    assert.ok(after.usedBytes < 1_300_000, `bob at ${after.usedBytes} B of 1,000,000 after the revert`);

    // Contrast: DELETE /v1/users/bob, then the config (unchanged) applied again: another customer, from 0.
    assert.equal((await gw.admin('/v1/users/bob', { method: 'DELETE' })).status, 204);
    await gw.daemon.reload(testConfig({ ...gw.config, users: [ALICE, BOB, CAROL] } as never));
    assert.equal((await row(gw, 'bob')).usedBytes, 0, 'a name made again after an API delete starts at 0');
  } finally {
    await gw.close();
  }
});
