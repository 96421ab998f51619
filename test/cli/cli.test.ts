// The `rotor` command run as a child process (node rotorEntry(): dist/cli.js or src/cli.ts), against the loopback fake
// platform in remote mode, checking stdout, stderr and the exit codes of docs/reference.md.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { PLATFORM_CODES } from '../../src/platform/codes.ts';
import { FakePlatform } from '../platform/fake-platform.ts';
import { SAMPLES } from '../platform/samples.ts';
import { rotorEntry } from '../support/rotor-process.ts';

const SECRET = 'qwertyuiop123456asdfghjk';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cleanEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('ROTOR_')) env[k] = v;
  return { ...env, ROTOR_LOG_LEVEL: 'silent', ...extra };
}

function rotor(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...rotorEntry(), ...args], { env: cleanEnv(env), timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

describe('rotor CLI', () => {
  let fake: FakePlatform;
  let dir: string;
  let remoteConfig: string;
  let platformEnv: Record<string, string>;

  before(async () => {
    fake = await new FakePlatform({ appSecret: SECRET, responder: (op) => (op ? SAMPLES[op].response : undefined) }).start();
    dir = mkdtempSync(join(tmpdir(), 'rotor-cli-'));
    remoteConfig = join(dir, 'remote.yaml');
    writeFileSync(remoteConfig, 'platform:\n  mode: remote\n  timeoutMs: 2000\n  retries: 1\n  backoff: { baseMs: 1, maxMs: 2 }\n');
    platformEnv = { ROTOR_BASE_URL: fake.baseUrl, ROTOR_APP_KEY: fake.appKey, ROTOR_APP_SECRET: SECRET };
  });
  after(async () => {
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('call GetAppInfo prints the decrypted app record', async () => {
    const r = await rotor(['call', 'GetAppInfo', '--config', remoteConfig], platformEnv);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), SAMPLES.GetAppInfo.response);
  });

  test('call with --params JSON and @file sends the params; ROTOR_PLATFORM_MODE selects remote without a file', async () => {
    const file = join(dir, 'draw.json');
    writeFileSync(file, JSON.stringify({ appUsername: 'alice', productNo: 'P-9', sessTime: 15 }));
    const [a, b] = await Promise.all([
      rotor(['call', 'DrawByPwd', '--params', '{"appUsername":"bob","productNo":"P-8"}', '--config', remoteConfig], platformEnv),
      rotor(['call', 'DrawByPwd', '--params', `@${file}`], { ...platformEnv, ROTOR_PLATFORM_MODE: 'remote' }),
    ]);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(b.code, 0, b.stderr);
    assert.deepEqual(JSON.parse(a.stdout), SAMPLES.DrawByPwd.response);
    const sent = fake.received.filter((x) => x.operation === 'DrawByPwd').map((x) => x.params);
    assert.deepEqual(
      sent.sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y))),
      [
        { appUsername: 'alice', sessTime: '15', productNo: 'P-9' },
        { appUsername: 'bob', productNo: 'P-8' },
      ],
    );
  });

  test('call SetProxyUserFlowLimit: a 200 without data prints null', async () => {
    const r = await rotor(
      ['call', 'SetProxyUserFlowLimit', '--params', '{"appUsername":"a","productNo":"P","limitFlow":-1}', '--config', remoteConfig],
      platformEnv,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'null');
  });

  test('every part 7 code exits 3 with "platform error <code>: <msg>"', async () => {
    const codes = Object.keys(PLATFORM_CODES)
      .map(Number)
      .filter((c) => c !== 200);
    fake.router = (op, params) => {
      const m = op === 'GetOrder' ? /^code-(\d+)$/.exec((params as { orderNo?: string }).orderNo ?? '') : null;
      return m ? { kind: 'reply', code: Number(m[1]), msg: `refused ${m[1]}`, rawData: 'garbage' } : undefined;
    };
    try {
      const runs: [number, Run][] = [];
      for (let i = 0; i < codes.length; i += 4) {
        const batch = codes.slice(i, i + 4);
        const results = await Promise.all(
          batch.map((c) =>
            rotor(['call', 'GetOrder', '--params', JSON.stringify({ orderNo: `code-${c}` }), '--config', remoteConfig], platformEnv),
          ),
        );
        batch.forEach((c, j) => runs.push([c, results[j]!]));
      }
      for (const [c, r] of runs) {
        assert.equal(r.code, 3, `${c}: ${r.stderr}`);
        assert.equal(r.stderr.trim(), `platform error ${c}: refused ${c}`);
        assert.equal(r.stdout, '');
      }
    } finally {
      fake.router = undefined;
    }
  });

  test('transport failures exit 4: refused, undecryptable reply, HTTP error page', async () => {
    const srv = http.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const closedPort = (srv.address() as AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    fake.router = (op) =>
      op === 'GetProjectList'
        ? { kind: 'reply', code: 200, rawData: 'bm90IGNpcGhlcnRleHQ=' }
        : op === 'GetCityList'
          ? { kind: 'http', status: 404, body: 'nope' }
          : undefined;
    try {
      const [refused, garbage, page] = await Promise.all([
        rotor(['call', 'GetAppInfo', '--config', remoteConfig], { ...platformEnv, ROTOR_BASE_URL: `http://127.0.0.1:${closedPort}` }),
        rotor(['call', 'GetProjectList', '--config', remoteConfig], platformEnv),
        rotor(['call', 'GetCityList', '--config', remoteConfig], platformEnv),
      ]);
      assert.equal(refused.code, 4, refused.stderr);
      assert.match(refused.stderr, /transport failure \(refused\)/);
      assert.equal(garbage.code, 4, garbage.stderr);
      assert.match(garbage.stderr, /undecryptable reply/);
      assert.equal(page.code, 4, page.stderr);
      assert.match(page.stderr, /HTTP 404/);
      for (const r of [refused, garbage, page]) assert.ok(!r.stderr.includes(SECRET));
    } finally {
      fake.router = undefined;
    }
  });

  test('usage errors exit 2 and send nothing: unknown operation, bad JSON, a part 8 violation, unknown command', async () => {
    const before = fake.received.length;
    const [unknownOp, badJson, limit, unknownCmd, none, stray] = await Promise.all([
      rotor(['call', 'NoSuchOp', '--config', remoteConfig], platformEnv),
      rotor(['call', 'GetOrder', '--params', '{orderNo:', '--config', remoteConfig], platformEnv),
      rotor(['call', 'GetOrder', '--params', '{"orderNo":"O1","pageSize":101}', '--config', remoteConfig], platformEnv),
      rotor(['frobnicate']),
      rotor([]),
      rotor(['check-config', '--params', '{}']),
    ]);
    assert.equal(unknownOp.code, 2);
    assert.match(unknownOp.stderr, /unknown operation "NoSuchOp"; one of: GetAppInfo, /);
    assert.equal(badJson.code, 2);
    assert.match(badJson.stderr, /--params: not valid JSON/);
    assert.equal(limit.code, 2);
    assert.match(limit.stderr, /GetOrder: invalid request: pageSize: /);
    assert.equal(unknownCmd.code, 2);
    assert.match(unknownCmd.stderr, /unknown command "frobnicate"/);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /usage: rotor/);
    assert.equal(stray.code, 2);
    assert.equal(fake.received.length, before, 'nothing was sent');
  });

  test('check-config prints the effective config with secrets redacted', async () => {
    const file = join(dir, 'secrets.yaml');
    writeFileSync(
      file,
      'platform:\n  mode: remote\n  baseUrl: http://127.0.0.1:1\n  appKey: key1\nadmin:\n  token: admintoken123\nusers:\n  - { name: carol, password: carol-secret-pw, mainAccount: shop9 }\n',
    );
    const r = await rotor(['check-config', '--config', file], { ROTOR_APP_SECRET: SECRET, ROTOR_HTTP_PORT: '18081' });
    assert.equal(r.code, 0, r.stderr);
    for (const secret of [SECRET, 'admintoken123', 'carol-secret-pw']) assert.ok(!r.stdout.includes(secret), secret);
    const shown = parseYaml(r.stdout) as {
      platform: Record<string, unknown>;
      proxy: { http: { port: number } };
      admin: { token: string };
      users: { password: string; draw: string }[];
    };
    assert.equal(shown.platform.appSecret, '***');
    assert.equal(shown.platform.appKey, 'key1');
    assert.equal(shown.admin.token, '***');
    assert.equal(shown.users[0]?.password, '***');
    assert.equal(shown.users[0]?.draw, 'pwd', 'defaults are shown');
    assert.equal(shown.proxy.http.port, 18081, 'env overrides are applied');
  });

  test('check-config reports how each user will draw, from the product records (embedded sandbox)', async () => {
    const file = join(dir, 'plans.yaml');
    writeFileSync(
      file,
      'users:\n  - { name: carol, password: carol-pass-1, mainAccount: shop1, product: DYN-104-MAIN, draw: api }\n  - { name: dave, password: dave-pass-1, mainAccount: shop1, product: DYN-104-IP5 }\n',
    );
    const r = await rotor(['check-config', '--config', file]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /carol on DYN-104-MAIN: password draw as main account shop1/);
    assert.match(r.stdout, /pwdDrawProxyUser -1/);
    assert.match(r.stdout, /ipWhiteList -1/);
    assert.match(r.stdout, /dave on DYN-104-IP5: .*one IP per exit kept 10 min/);
    assert.equal((parseYaml(r.stdout) as { users: unknown[] }).users.length, 2, 'still valid YAML');
  });

  test('an invalid config exits 2 naming the key (check-config and start)', async () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'platform:\n  appSecret: not-a-good-length\n');
    const [check, start] = await Promise.all([rotor(['check-config', '--config', file]), rotor(['start', '--config', file])]);
    for (const r of [check, start]) {
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /platform\.appSecret: must be 16, 24 or 32 bytes \(got 17\)/);
      assert.ok(!r.stderr.includes('not-a-good-length'));
    }
  });

  test('rotor sim prints its JSON line, answers rotor call in remote mode, and stops on SIGTERM; embedded call works', async () => {
    const sim = spawn(process.execPath, [...rotorEntry(), 'sim', '--host', '127.0.0.1', '--port', '0'], {
      env: cleanEnv({}),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const lines = createInterface({ input: sim.stdout });
      const [first] = (await once(lines, 'line')) as [string];
      const ready = JSON.parse(first) as { baseUrl: string; appKey: string; appSecret: string };
      assert.match(ready.baseUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
      const [remote, embedded] = await Promise.all([
        rotor(['call', 'GetAppInfo'], {
          ROTOR_PLATFORM_MODE: 'remote',
          ROTOR_BASE_URL: ready.baseUrl,
          ROTOR_APP_KEY: ready.appKey,
          ROTOR_APP_SECRET: ready.appSecret,
        }),
        rotor(['call', 'GetAppInfo']),
      ]);
      for (const r of [remote, embedded]) {
        assert.equal(r.code, 0, r.stderr);
        assert.equal(typeof (JSON.parse(r.stdout) as { appName: unknown }).appName, 'string');
      }
    } finally {
      const exited = once(sim, 'exit');
      sim.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0);
    }
  });

  test('--help exits 0 with the usage', async () => {
    const r = await rotor(['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /rotor <command>/);
  });
});
