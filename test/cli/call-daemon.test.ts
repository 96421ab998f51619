// `rotor call` with an embedded config, run as a child process: with a daemon running, the call reaches that
// daemon's sandbox (an order placed through the daemon is found); with none answering on admin.host:port, it
// says on stderr that it used a throwaway sandbox (where that order does not exist: platform error, exit 3).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { freePort } from '../support/ports.ts';
import { launchRotor, REPO_ROOT, rotorEntry, type RotorChild } from '../support/rotor-process.ts';

const TOKEN = 'cli-call-token-Qw81';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function rotorCall(args: string[], configFile: string): Promise<Run> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('ROTOR_')) env[k] = v;
  env.ROTOR_LOG_LEVEL = 'silent';
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...rotorEntry(), 'call', ...args, '--config', configFile],
      { cwd: REPO_ROOT, env, timeout: 60_000 },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
      },
    );
  });
}

describe('rotor call with an embedded config', () => {
  let dir: string;
  let daemon: RotorChild;
  let daemonConfig: string;
  let deadConfig: string;
  const appOrderNo = `clisee${Date.now().toString(36)}`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rotor-call-'));
    daemon = await launchRotor({
      env: {
        ROTOR_HTTP_PORT: '0',
        ROTOR_SOCKS_PORT: '0',
        ROTOR_ADMIN_PORT: '0',
        ROTOR_CALLBACK_PORT: '0',
        ROTOR_ADMIN_TOKEN: TOKEN,
        ROTOR_STORE: join(dir, 'rotor.db'),
        ROTOR_LOG_LEVEL: 'info',
      },
    });
    // What the operator's `rotor call` reads: the same embedded config, with the daemon's admin address.
    daemonConfig = join(dir, 'daemon.yaml');
    writeFileSync(
      daemonConfig,
      stringify({ platform: { mode: 'embedded' }, admin: { host: '127.0.0.1', port: daemon.ports.admin, token: TOKEN } }),
    );
    deadConfig = join(dir, 'dead.yaml');
    writeFileSync(
      deadConfig,
      stringify({ platform: { mode: 'embedded' }, admin: { host: '127.0.0.1', port: await freePort(), token: TOKEN } }),
    );
    // An order placed in the daemon's sandbox, through its admin API.
    const res = await fetch(`http://127.0.0.1:${daemon.ports.admin}/v1/platform/InstanceOpen`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ appOrderNo, params: [{ productNo: SIM_PRODUCTS.staticUsSocks, count: 1, cycleTimes: 1 }] }),
    });
    assert.equal(res.status, 200, await res.clone().text());
  });
  after(async () => {
    await daemon?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("with a daemon answering: the call reaches the daemon's platform and sees its order", async () => {
    const r = await rotorCall(['GetOrder', '--params', JSON.stringify({ appOrderNo })], daemonConfig);
    assert.equal(r.code, 0, r.stderr);
    const order = JSON.parse(r.stdout) as { appOrderNo: string };
    assert.equal(order.appOrderNo, appOrderNo);
    assert.doesNotMatch(r.stderr, /throwaway/);
  });

  test("a platform refusal through the daemon exits 3 with the platform's code, as a direct call does", async () => {
    const r = await rotorCall(['GetOrder', '--params', JSON.stringify({ appOrderNo: 'nosuchorder1' })], daemonConfig);
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /^platform error \d+: /m);
  });

  test('a wrong token is refused naming admin.token (exit 2)', async () => {
    const wrong = join(dir, 'wrong.yaml');
    writeFileSync(
      wrong,
      stringify({ platform: { mode: 'embedded' }, admin: { host: '127.0.0.1', port: daemon.ports.admin, token: 'not-the-token' } }),
    );
    const r = await rotorCall(['GetAppInfo'], wrong);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /admin\.token/);
  });

  test('with no daemon answering: stderr says a throwaway sandbox was used, and the order is not there', async () => {
    const r = await rotorCall(['GetOrder', '--params', JSON.stringify({ appOrderNo })], deadConfig);
    assert.match(r.stderr, /no daemon answered on http:\/\/127\.0\.0\.1:\d+ .*throwaway embedded sandbox/);
    assert.equal(r.code, 3, 'the throwaway sandbox has no such order');
    assert.match(r.stderr, /platform error \d+: /);
  });
});
