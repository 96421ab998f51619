// The embedded sandbox remembers across restarts: `rotor start` (the real CLI, as `npm start` runs it) with
// the sandbox inside, a user made through POST /v1/users on a main account the config does not know, traffic
// through it, a graceful stop, a second start on the same files — the user still works (its sub account,
// its main account and that account's traffic are still on the platform), its balance is what the first run
// left, and the state file sits beside the store.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  adminGet,
  adminSend,
  cleanup,
  curl,
  rawConfig,
  spawnDaemon,
  startTarget,
  tempDir,
  writeConfigFile,
  type BytesTarget,
} from '../e2e/limits-harness.ts';

const viaSocks5h = (port: number, user: string, pass: string): string[] => ['-x', `socks5h://${user}:${pass}@127.0.0.1:${port}`];

describe('embedded sandbox: state kept across restarts', () => {
  let target: BytesTarget;
  before(async () => {
    target = await startTarget();
  });
  after(async () => {
    await target?.close();
    cleanup();
  });

  test('a user made through the API works after a restart, on the same platform accounts', async () => {
    const dir = tempDir();
    const file = join(dir, 'rotor.yaml');
    // A configured user on shop1 gets the demo credit; the API user is on shop1 too (a main account with traffic).
    writeConfigFile(file, rawConfig(dir, [{ name: 'erin', password: 'erin-pw', mainAccount: 'shop1' }]));
    let d = await spawnDaemon(file, join(dir, 'rotor.log'));
    let platformName: string;
    try {
      const made = await adminSend<{ name: string; state: string }>(d.ports.admin, 'POST', '/v1/users', {
        name: 'cust1',
        password: 'cust1-pass-1',
        mainAccount: 'shop1',
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const r = await curl([...viaSocks5h(d.ports.socks5, 'cust1', 'cust1-pass-1'), target.url(50_000)]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.size, 50_000);
      const sub = await adminSend<{ username: string }>(d.ports.admin, 'POST', '/v1/platform/GetProxyUserInfo', {
        appUsername: 'cust1',
        productNo: 'DYN-104-FLOW',
      });
      assert.equal(sub.status, 200, JSON.stringify(sub.body));
      platformName = sub.body.username;
    } finally {
      await d.stop();
    }

    d = await spawnDaemon(file, join(dir, 'rotor2.log'));
    try {
      const sub = await adminSend<{ username: string }>(d.ports.admin, 'POST', '/v1/platform/GetProxyUserInfo', {
        appUsername: 'cust1',
        productNo: 'DYN-104-FLOW',
      });
      assert.equal(sub.status, 200, `the platform still knows cust1: ${JSON.stringify(sub.body)}`);
      assert.equal(sub.body.username, platformName, 'the same sub account, not a new one');
      const r = await curl([...viaSocks5h(d.ports.socks5, 'cust1', 'cust1-pass-1'), target.url(50_000)]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.size, 50_000);
      const user = await adminGet<{ state: string }>(d.ports.admin, '/v1/users/cust1');
      assert.equal(user.state, 'ready');
      const text = d.logText();
      assert.doesNotMatch(text, /limit sync failed/, 'no sync warnings after the restart');
      assert.doesNotMatch(text, /sandbox: credited demo traffic/, 'shop1 kept its traffic: no second demo credit');
      assert.ok(existsSync(join(dir, 'rotor.db.sandbox.json')), 'the sandbox state file beside the store');
    } finally {
      await d.stop();
    }
  });
});
