// Rotating a leaked admin token by SIGHUP while the store is down: the token is replaced in the reload's first step,
// which depends on nothing, so a store write failing later (the reload ends CONFIG_RELOAD_INCOMPLETE) does not keep
// the leaked token valid. Real daemon (child process), real redis-server (stopped with SIGSTOP, resumed with SIGCONT).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitForPort } from '../support/ports.ts';
import { cleanup, rawConfig, spawnDaemon, tempDir, waitFor, writeConfigFile, type ChildDaemon } from './limits-harness.ts';

const OLD_TOKEN = 'leaked-admin-token-Aa11';
const NEW_TOKEN = 'rotated-admin-token-Bb22';

let daemon: ChildDaemon;
let dir: string;
let configFile: string;
let redis: ChildProcess;
let url: string;
let rdir: string;

function config(token: string): Record<string, unknown> {
  return rawConfig(dir, [{ name: 'alice', password: 'alice-pw-Cc33', mainAccount: 'shop1' }], {
    admin: { token },
    store: { store: { path: url }, fleet: { prefix: 'rtd:', sliceBytes: 1_000_000 } },
  }) as Record<string, unknown>;
}

async function status(token: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${daemon.ports.admin}/v1/sessions`, {
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(10_000),
  });
  await res.arrayBuffer();
  return res.status;
}

before(async () => {
  dir = tempDir('rotor-reload-token-down-');
  const port = await freePort();
  rdir = mkdtempSync(join(tmpdir(), 'rotor-reload-redis-'));
  redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', rdir], {
    stdio: 'ignore',
  });
  await waitForPort(port);
  url = `redis://127.0.0.1:${port}`;
  configFile = join(dir, 'rotor.yaml');
  writeConfigFile(configFile, config(OLD_TOKEN));
  daemon = await spawnDaemon(configFile, join(dir, 'rotor.log'));
});
after(async () => {
  redis?.kill('SIGCONT');
  await daemon?.stop();
  redis?.kill('SIGKILL');
  if (rdir) rmSync(rdir, { recursive: true, force: true });
  cleanup();
});

test('a token rotated by SIGHUP while the store is down: the leaked token no longer opens the admin API', async () => {
  assert.equal(await status(OLD_TOKEN), 200);
  const before = daemon.lines().length;
  redis.kill('SIGSTOP');
  writeConfigFile(configFile, config(NEW_TOKEN));
  daemon.signal('SIGHUP');
  const line = await waitFor(
    'the reload',
    () =>
      daemon
        .lines()
        .slice(before)
        .find((l) => /configuration reload|reload refused|configuration reloaded/.test(String(l.msg))),
    60_000,
  );
  redis.kill('SIGCONT');
  const oldStatus = await status(OLD_TOKEN);
  const newStatus = await status(NEW_TOKEN);
  assert.ok(
    oldStatus === 401 && newStatus !== 401,
    `reload ended '${String(line.msg).slice(0, 90)}'; then the old (leaked) token → ${oldStatus}, the new → ${newStatus}`,
  );
});
