// One process per SQLite store. A second `rotor start` on the same store.path (other ports) would enforce each
// customer's quota from its own counters and, in embedded mode, write its sandbox state over the first's; it is
// refused at start, before it writes anything, and the first daemon keeps serving. A SIGKILLed holder leaves no
// stale lock. `rotor users import --store` is refused the same way while a daemon runs on the store.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { launchRotor, runRotorCommand } from '../support/rotor-process.ts';
import { cleanup, rawConfig, spawnDaemon, tempDir, userRow, writeConfigFile } from './limits-harness.ts';

after(() => cleanup());

test('a second daemon on the same SQLite store is refused before it writes, and the first keeps serving', async () => {
  const dir = tempDir();
  const file = join(dir, 'rotor.yaml');
  writeConfigFile(file, rawConfig(dir, [{ name: 'lena', password: 'lena-pw', mainAccount: 'shop1' }]));
  const first = await spawnDaemon(file, join(dir, 'first.log'));
  try {
    // Same config file (ports 0: its own ports), same store.
    await assert.rejects(launchRotor({ args: ['--config', file], logFile: join(dir, 'second.log') }), (err: Error) =>
      /STORE_IN_USE|in use by another process/.test(err.message),
    );
    const second = readFileSync(join(dir, 'second.log'), 'utf8');
    assert.match(second, /rotor\.db\.lock/);
    assert.doesNotMatch(second, /embedded sandbox platform started/, 'refused before its sandbox started');
    // The first still answers.
    assert.equal((await userRow(first.ports.admin, 'lena')).name, 'lena');

    // An import into the store while the daemon runs is refused too (exit 1 or 2, nothing written).
    const rows = join(dir, 'users.json');
    writeFileSync(rows, JSON.stringify([{ name: 'mona', password: 'mona-pw-123', mainAccount: 'shop1' }]));
    const imported = await runRotorCommand(['users', 'import', rows, '--store', '--config', file]);
    assert.notEqual(imported.code, 0, imported.stdout + imported.stderr);
    assert.match(imported.stderr + imported.stdout, /in use by another process/);

    // A SIGKILLed holder leaves nothing stale: the next start takes the store.
    first.signal('SIGKILL');
    await first.exited;
    const third = await spawnDaemon(file, join(dir, 'third.log'));
    try {
      assert.equal((await userRow(third.ports.admin, 'lena')).name, 'lena');
    } finally {
      await third.stop();
    }
  } finally {
    first.signal('SIGKILL');
    await first.exited;
  }
});
