// A reload whose file names a pool.tls.caFile that cannot be read is refused before anything changes: the log's
// "the running configuration is kept" is true (before, the users were seeded first and the old password stopped
// working although the reload was logged as refused).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { testStoreConfig } from '../support/store.ts';
import { viaHttp } from './harness.ts';
import {
  cleanup,
  curl,
  rawConfig,
  spawnDaemon,
  startTarget,
  tempDir,
  userRow,
  waitFor,
  writeConfigFile,
  type BytesTarget,
  type ChildDaemon,
  type TestUser,
} from './limits-harness.ts';

const TOKEN = 'reload-partial-token-Xy7';
const OLD_PW = 'old-pw-Aa11';
const NEW_PW = 'new-pw-Bb22';
const MIB = 1024 * 1024;

let target: BytesTarget;
let daemon: ChildDaemon;
let dir: string;
let configFile: string;
let store: Awaited<ReturnType<typeof testStoreConfig>>;

function config(password: string, limitBytes: number, caFile?: string): Record<string, unknown> {
  const users: TestUser[] = [{ name: 'alice', password, mainAccount: 'shop1', limitBytes }];
  const raw = rawConfig(dir, users, { admin: { token: TOKEN }, store }) as Record<string, unknown>;
  if (caFile !== undefined) (raw.pool as Record<string, unknown>).tls = { caFile };
  return raw;
}

before(async () => {
  target = await startTarget();
  dir = tempDir('rotor-reload-partial-');
  store = await testStoreConfig(join(dir, 'rotor.db'));
  configFile = join(dir, 'rotor.yaml');
  writeConfigFile(configFile, config(OLD_PW, 40 * MIB));
  daemon = await spawnDaemon(configFile, join(dir, 'rotor.log'));
});
after(async () => {
  await daemon?.stop();
  await target?.close();
  cleanup();
});

test('a reload refused part-way (unreadable pool.tls.caFile) keeps the running configuration, as its log line says', async () => {
  const ok = await curl([...viaHttp(daemon.ports.http, 'alice', OLD_PW), target.url(1000)]);
  assert.equal(ok.http, 200, `before the reload: ${ok.stderr}`);
  const before = daemon.lines().length;
  writeConfigFile(configFile, config(NEW_PW, 2 * MIB, join(dir, 'no-such-ca.pem')));
  daemon.signal('SIGHUP');
  await waitFor(
    'the refusal in the log',
    () =>
      daemon
        .lines()
        .slice(before)
        .find((l) => l.msg === 'reload refused; the running configuration is kept'),
    15_000,
  );
  const oldPw = await curl([...viaHttp(daemon.ports.http, 'alice', OLD_PW), target.url(1000)], { maxTimeS: 5 });
  const newPw = await curl([...viaHttp(daemon.ports.http, 'alice', NEW_PW), target.url(1000)], { maxTimeS: 5 });
  const row = await userRow(daemon.ports.admin, 'alice', TOKEN);
  assert.ok(
    oldPw.http === 200 && newPw.http !== 200 && row.limitBytes === 40 * MIB,
    `after "reload refused; the running configuration is kept": old password → ${oldPw.http}, the refused file's password → ${newPw.http}, ` +
      `limitBytes ${row.limitBytes} (running 41943040, refused file 2097152)`,
  );
});
