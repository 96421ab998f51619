// `rotor users import FILE` with no daemon running: the rows go into the config's store as creations, and the
// daemon started afterwards finishes them (platform sub accounts made) and serves the users. The real CLI as
// child processes, the embedded sandbox, curl through the SOCKS5 listener.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runRotorCommand } from '../support/rotor-process.ts';
import { after, before, describe, test } from 'node:test';
import { freePort } from '../support/ports.ts';
import { poll } from '../support/wait.ts';
import {
  adminGet,
  cleanup,
  curl,
  rawConfig,
  spawnDaemon,
  startTarget,
  tempDir,
  writeConfigFile,
  type BytesTarget,
} from './limits-harness.ts';

const rotorUsers = (args: string[]) => runRotorCommand(['users', ...args]);

const viaSocks5h = (port: number, user: string, pass: string): string[] => ['-x', `socks5h://${user}:${pass}@127.0.0.1:${port}`];

describe('users imported into the store while no daemon runs', () => {
  let target: BytesTarget;
  before(async () => {
    target = await startTarget();
  });
  after(async () => {
    await target?.close();
    cleanup();
  });

  test('no daemon at the admin address: the store takes the rows; the next start makes them and serves them', async () => {
    const dir = tempDir();
    const file = join(dir, 'rotor.yaml');
    const adminPort = await freePort();
    writeConfigFile(
      file,
      rawConfig(dir, [{ name: 'cfguser', password: 'cfg-pass-1', mainAccount: 'shop1' }], { admin: { port: adminPort } }),
    );
    const csv = join(dir, 'users.csv');
    writeFileSync(
      csv,
      [
        'name,password,mainAccount,quota.bytes,quota.period,listen.port',
        'imp1,imp1-pass-1,shop1,5000000,month,',
        'imp2,,shop1,,,',
        'cfguser,whatever-1,shop1,,,',
        `imp3,imp3-pass-1,shop1,,,${adminPort}`,
        'bad-name,bad-pass-1,shop1,,,',
        '',
      ].join('\n'),
    );

    const first = await rotorUsers(['import', csv, '--config', file]);
    assert.equal(first.code, 2, `rows failed, so exit 2:\n${first.stderr}`);
    assert.match(first.stderr, /no daemon answers at .*importing into the store/);
    assert.match(first.stderr, /line 4 \(cfguser\): USER_EXISTS/);
    assert.match(first.stderr, new RegExp(`line 5 \\(imp3\\): PORT_IN_USE: listen.port ${adminPort}`));
    assert.match(first.stderr, /line 6 \(bad-name\): INVALID_INPUT/);
    assert.match(first.stderr, /imported 2 of 5 users/);
    const generated = /^imp2,(\S+)$/m.exec(first.stdout);
    assert.ok(generated, `the generated password is printed once:\n${first.stdout}`);

    const again = await rotorUsers(['import', csv, '--config', file, '--store']);
    assert.match(again.stderr, /line 2 \(imp1\): USER_EXISTS/, 'a second import finds the first in the store');
    assert.match(again.stderr, /imported 0 of 5 users/);

    const d = await spawnDaemon(file, join(dir, 'rotor.log'));
    try {
      const ready = await poll(
        async () => {
          const u = await adminGet<{ state: string }>(d.ports.admin, '/v1/users/imp1');
          return u.state === 'ready' ? u : undefined;
        },
        { what: 'imp1 made ready by the daemon', timeoutMs: 60_000, everyMs: 100 },
      );
      assert.equal(ready.state, 'ready');
      const one = await curl([...viaSocks5h(d.ports.socks5, 'imp1', 'imp1-pass-1'), target.url(40_000)]);
      assert.equal(one.code, 0, one.stderr);
      assert.equal(one.size, 40_000);
      const two = await curl([...viaSocks5h(d.ports.socks5, 'imp2', generated[1]!), target.url(30_000)]);
      assert.equal(two.code, 0, two.stderr);
      assert.equal(two.size, 30_000);
      const wrong = await curl([...viaSocks5h(d.ports.socks5, 'imp1', 'not-the-password'), target.url(10)]);
      assert.notEqual(wrong.code, 0, 'a wrong password is still refused');
      const imp1 = await adminGet<{ limitBytes: number; source: string }>(d.ports.admin, '/v1/users/imp1');
      assert.equal(imp1.limitBytes, 5_000_000);
      assert.equal(imp1.source, 'api');
    } finally {
      await d.stop();
    }
  });
});
