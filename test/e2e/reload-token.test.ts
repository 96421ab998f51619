// Rotating a leaked admin token by SIGHUP: the new token opens the admin API at once and the old one no longer
// does; a changed setting a reload does not apply is named in a warning instead of passing as "reloaded".
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { testStoreConfig } from '../support/store.ts';
import { cleanup, rawConfig, spawnDaemon, tempDir, waitFor, writeConfigFile, type ChildDaemon } from './limits-harness.ts';

const OLD_TOKEN = 'leaked-admin-token-Aa11';
const NEW_TOKEN = 'rotated-admin-token-Bb22';

let daemon: ChildDaemon;
let dir: string;
let configFile: string;
let store: Awaited<ReturnType<typeof testStoreConfig>>;

function config(token: string, drainMs?: number): Record<string, unknown> {
  const raw = rawConfig(dir, [{ name: 'alice', password: 'alice-pw-Cc33', mainAccount: 'shop1' }], { admin: { token }, store }) as Record<
    string,
    unknown
  >;
  if (drainMs !== undefined) (raw.proxy as Record<string, unknown>).drainMs = drainMs;
  return raw;
}

async function status(token: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${daemon.ports.admin}/v1/users`, {
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(10_000),
  });
  await res.arrayBuffer();
  return res.status;
}

before(async () => {
  dir = tempDir('rotor-reload-token-');
  store = await testStoreConfig(join(dir, 'rotor.db'));
  configFile = join(dir, 'rotor.yaml');
  writeConfigFile(configFile, config(OLD_TOKEN));
  daemon = await spawnDaemon(configFile, join(dir, 'rotor.log'));
});
after(async () => {
  await daemon?.stop();
  cleanup();
});

test('a new admin.token applied by SIGHUP opens the admin API and the old one no longer does; a setting a reload does not apply is named', async () => {
  assert.equal(await status(OLD_TOKEN), 200);
  const before = daemon.lines().length;
  writeConfigFile(configFile, config(NEW_TOKEN, 4321));
  daemon.signal('SIGHUP');
  const line = await waitFor(
    'the reload',
    () =>
      daemon
        .lines()
        .slice(before)
        .find((l) => l.msg === 'configuration reloaded' || l.msg === 'reload refused; the running configuration is kept'),
    15_000,
  );
  assert.equal(line.msg, 'configuration reloaded');
  const [oldStatus, newStatus] = [await status(OLD_TOKEN), await status(NEW_TOKEN)];
  assert.ok(
    oldStatus === 401 && newStatus === 200,
    `after the reload: the old (leaked) token → ${oldStatus}, the new token → ${newStatus}`,
  );
  const warning = daemon
    .lines()
    .slice(before)
    .find((l) => /take effect at the next start/.test(String(l.msg)));
  assert.deepEqual(warning?.keys, ['proxy.drainMs'], `the warning: ${JSON.stringify(warning)}`);
  // Names only: no value of the config (the token least of all) is in the log.
  assert.ok(
    !daemon
      .lines()
      .slice(before)
      .some((l) => JSON.stringify(l).includes(NEW_TOKEN)),
    'the new token is logged',
  );
});
