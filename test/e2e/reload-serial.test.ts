// Two SIGHUPs close together (an edit, then its revert; a config tool writing twice): reloads run one at a time and
// the signal that came during a reload reads the file again once it ends, so the daemon ends on the file as it is.
// Run at once, the edit's slower seed (two scrypts per changed user) landed after the revert's: the daemon served
// the edit's passwords the file no longer had.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { join } from 'node:path';
import { testStoreConfig } from '../support/store.ts';
import {
  cleanup,
  rawConfig,
  spawnDaemon,
  startTarget,
  tempDir,
  userRow,
  waitFor,
  writeConfigFile,
  type BytesTarget,
  type ChildDaemon,
} from './limits-harness.ts';

const TOKEN = 'reload-race-token';
const N = 80;
let target: BytesTarget;
let daemon: ChildDaemon;
let dir: string;
let configFile: string;
let store: Awaited<ReturnType<typeof testStoreConfig>>;

const names = ['alice', ...Array.from({ length: N }, (_, i) => `u${i}`)];
const EDIT_LIMIT = 7 * 1024 * 1024;
const config = (password: (name: string) => string, aliceLimit = -1) =>
  rawConfig(
    dir,
    names.map((name) => ({
      name,
      password: password(name),
      mainAccount: 'shop1',
      ...(name === 'alice' ? { limitBytes: aliceLimit } : {}),
    })),
    { admin: { token: TOKEN }, store },
  );
const OLD = (n: string) => `${n}-old-pw`;
const EDIT = (n: string) => `${n}-edit-pw`;

before(async () => {
  target = await startTarget();
  dir = tempDir('rotor-reload-race-');
  store = await testStoreConfig(join(dir, 'rotor.db'));
  configFile = join(dir, 'rotor.yaml');
  writeConfigFile(configFile, config(OLD));
  daemon = await spawnDaemon(configFile, join(dir, 'rotor.log'));
});
after(async () => {
  await daemon?.stop();
  await target?.close();
  cleanup();
});

/** Whether the HTTP listener takes the pair: a CONNECT's status line (200 or 407), on a raw socket (no curl start-up). */
const works = (user: string, password: string): Promise<boolean> =>
  new Promise((resolve, reject) => {
    const s = connect(daemon.ports.http, '127.0.0.1', () =>
      s.write(
        `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\n` +
          `Proxy-Authorization: Basic ${Buffer.from(`${user}:${password}`).toString('base64')}\r\n\r\n`,
      ),
    );
    let text = '';
    s.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (text.includes('\r\n')) {
        resolve(/^HTTP\/1\.1 200/.test(text));
        s.destroy();
      }
    });
    s.on('error', reject);
  });

test('an edit and its revert reloaded back to back: the daemon ends on the file as it is', async () => {
  const reloaded = () => daemon.lines().filter((l) => l.msg === 'configuration reloaded').length;
  const before = reloaded();
  writeConfigFile(configFile, config(EDIT, EDIT_LIMIT));
  daemon.signal('SIGHUP');
  // The edit's reload is under way (it has read the file and set the users' limits: its seed has begun) ...
  await waitFor(
    "the edit's seed to begin",
    async () => ((await userRow(daemon.ports.admin, 'alice', TOKEN)).limitBytes === EDIT_LIMIT ? true : undefined),
    30_000,
    5,
  );
  // ... when the operator reverts it and signals again.
  writeConfigFile(configFile, config(OLD));
  daemon.signal('SIGHUP');
  await waitFor('both reloads', () => (reloaded() >= before + 2 ? true : undefined), 120_000);
  const last = `u${N - 1}`;
  const [oldOk, editOk] = [await works(last, OLD(last)), await works(last, EDIT(last))];
  assert.ok(
    oldOk && !editOk,
    `the file holds the revert, yet ${last}: the file's password → ${oldOk ? 200 : 'refused'}, the reverted edit's → ${editOk ? 200 : 'refused'}`,
  );
});
