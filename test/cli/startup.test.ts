// Issue 13, item 9: `rotor start` binds every listener before it touches the platform, and a taken port is
// exit 2 with the config key that names it. Red before: the remote platform received the reconcile's calls,
// then the daemon died with "internal error: Error: listen EADDRINUSE" and exit 1.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rotorEntry } from '../support/rotor-process.ts';
import { lockStore } from '../../src/store/store-lock.ts';

function listen(s: Server | HttpServer): Promise<number> {
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve((s.address() as AddressInfo).port)));
}

function rotorStart(config: string, env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('ROTOR_')) clean[k] = v;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...rotorEntry(), 'start', '--config', config],
      { env: { ...clean, ...env }, timeout: 30_000 },
      (err, _stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr });
      },
    );
  });
}

describe('rotor start: listeners first, then the platform', () => {
  let platform: HttpServer;
  let platformPort: number;
  let platformCalls = 0;
  let taken: Server;
  let takenPort: number;
  let dir: string;
  let config: string;

  before(async () => {
    // Stands in for a remote platform: any request reaching it means Rotor touched the platform.
    platform = createHttpServer((_req, res) => {
      platformCalls++;
      res.statusCode = 500;
      res.end();
    });
    platformPort = await listen(platform);
    taken = createServer();
    takenPort = await listen(taken);
    dir = mkdtempSync(join(tmpdir(), 'rotor-startup-'));
    config = join(dir, 'rotor.yaml');
    writeFileSync(
      config,
      [
        'platform:',
        '  mode: remote',
        `  baseUrl: http://127.0.0.1:${platformPort}`,
        '  appKey: key',
        '  appSecret: qwertyuiop123456',
        '  timeoutMs: 1000',
        '  retries: 0',
        'proxy: { http: { port: 0 }, socks5: { port: 0 } }',
        'callback: { port: 0 }',
        `store: { path: ${join(dir, 'rotor.db')} }`,
        'users:',
        '  - { name: alice, password: alice-pass, mainAccount: shop, product: P1, draw: pwd }',
        '',
      ].join('\n'),
    );
  });
  after(async () => {
    await new Promise((r) => platform.close(r));
    await new Promise((r) => taken.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  test('a taken admin port: exit 2 naming admin.port, and not one platform call', async () => {
    const r = await rotorStart(config, { ROTOR_ADMIN_PORT: String(takenPort), ROTOR_LOG_LEVEL: 'silent' });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`admin\\.port: 127\\.0\\.0\\.1:${takenPort} is in use`));
    assert.doesNotMatch(r.stderr, /internal error/);
    assert.equal(platformCalls, 0, 'the platform was touched before the ports were known to be free');
  });

  test('a taken proxy port and a port given twice are named the same way', async () => {
    const http = await rotorStart(config, { ROTOR_HTTP_PORT: String(takenPort), ROTOR_ADMIN_PORT: '0', ROTOR_LOG_LEVEL: 'silent' });
    assert.equal(http.code, 2, http.stderr);
    assert.match(http.stderr, new RegExp(`proxy\\.http\\.port: 127\\.0\\.0\\.1:${takenPort} is in use`));
    const free = createServer();
    const port = await listen(free);
    await new Promise((r) => free.close(r));
    const twice = await rotorStart(config, { ROTOR_SOCKS_PORT: String(port), ROTOR_ADMIN_PORT: String(port), ROTOR_LOG_LEVEL: 'silent' });
    assert.equal(twice.code, 2, twice.stderr);
    assert.match(twice.stderr, new RegExp(`admin\\.port: 127\\.0\\.0\\.1:${port} is in use`));
    assert.equal(platformCalls, 0);
  });

  // review17 #12: a config user's own port held by another process was logged and skipped; the daemon said ready.
  test("a config user's listen.port another process holds: exit 2 naming users.<i>.listen.port, and not one platform call", async () => {
    const withPort = join(dir, 'user-port.yaml');
    writeFileSync(
      withPort,
      readFileSync(config, 'utf8').replace(
        '  - { name: alice, password: alice-pass, mainAccount: shop, product: P1, draw: pwd }',
        [
          '  - { name: alice, password: alice-pass, mainAccount: shop, product: P1, draw: pwd }',
          `  - { name: bob, password: bob-pass, mainAccount: shop, product: P1, draw: pwd, listen: { port: ${takenPort} } }`,
        ].join('\n'),
      ),
    );
    const r = await rotorStart(withPort, { ROTOR_ADMIN_PORT: '0', ROTOR_LOG_LEVEL: 'silent' });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`users\\.1\\.listen\\.port: 127\\.0\\.0\\.1:${takenPort} is in use`));
    assert.equal(platformCalls, 0);
  });

  // review17 #15: a store another process holds ended the start with "internal error: StoreInUseError", exit 1.
  test('a store another process holds: exit 2 naming store.path, not an internal error', async () => {
    const lock = lockStore(join(dir, 'rotor.db'), 'the test');
    try {
      const r = await rotorStart(config, { ROTOR_ADMIN_PORT: '0', ROTOR_LOG_LEVEL: 'silent' });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /^store\.path: store \S+rotor\.db is in use by another process/m);
      assert.doesNotMatch(r.stderr, /internal error/);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    } finally {
      lock?.release();
    }
    assert.equal(platformCalls, 0);
  });
});
