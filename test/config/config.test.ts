import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig, parseConfig, redactConfig, isLoopbackHost, resolveConfigFile } from '../../src/config/index.ts';

const SECRET16 = 'abcdefghijklmnop';

function issuesOf(fn: () => unknown) {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    assert.equal(e.code, 'CONFIG_INVALID');
    return e;
  }
  assert.fail('expected a ConfigError');
}

describe('config', () => {
  let dir: string;
  const write = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'rotor-config-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('config/default.yaml: embedded, alice (pwd) and bob (api), store data/rotor.db, docs/reference.md defaults', () => {
    const c = loadConfig({ file: 'config/default.yaml', env: {} });
    assert.equal(c.platform.mode, 'embedded');
    assert.equal(c.platform.appSecret, '');
    assert.equal(c.platform.timeoutMs, 10_000);
    assert.equal(c.platform.retries, 3);
    assert.equal(c.platform.version, 'v2');
    assert.equal(c.platform.encrypt, 'aes');
    assert.deepEqual(c.proxy.http, { host: '127.0.0.1', port: 8080 });
    assert.deepEqual(c.proxy.socks5, { host: '127.0.0.1', port: 1080 });
    assert.deepEqual(c.admin, { host: '127.0.0.1', port: 9090, token: '', allowedHosts: [], allowedOrigins: [], metricsToken: 'auto' });
    assert.deepEqual(c.callback, { host: '127.0.0.1', port: 9091, path: '/callback' });
    assert.equal(c.store.path, 'data/rotor.db');
    assert.deepEqual(
      c.users.map((u) => [u.name, u.draw, u.product, u.mainAccount]),
      [
        ['alice', 'pwd', '', 'shop1'],
        ['bob', 'api', '', 'shop1'],
      ],
    );
  });

  test('an empty file gets every default, and the built-in defaults equal config/default.yaml apart from users', () => {
    const c = loadConfig({ file: write('empty.yaml', ''), env: {} });
    const d = loadConfig({ file: 'config/default.yaml', env: {} });
    assert.deepEqual({ ...c, users: [] }, { ...d, users: [] });
    assert.deepEqual(c.users, []);
    assert.equal(c.proxy.connectTimeoutMs, 10_000);
    assert.equal(c.proxy.handshakeTimeoutMs, 10_000);
    assert.equal(c.proxy.retries, 3);
    assert.equal(c.log.level, 'info');
  });

  // review17 #3: default.yaml says every key is shown with its default; pool.outlier, pool.replacePerMinute,
  // proxy.requestRules and three log.access keys were not (not even commented).
  test('config/default.yaml names every key of the effective config (set or commented)', () => {
    const text = readFileSync('config/default.yaml', 'utf8');
    const missing: string[] = [];
    const walk = (value: unknown, path: string): void => {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
      for (const [key, v] of Object.entries(value)) {
        const at = path === '' ? key : `${path}.${key}`;
        if (at === 'users') continue;
        if (!new RegExp(`(^|[\\s{,#])${key}:`, 'm').test(text)) missing.push(at);
        walk(v, at);
      }
    };
    walk(parseConfig({}, { env: {} }), '');
    assert.deepEqual(missing, []);
  });

  test('user defaults: product "", draw pwd, sessTime 5, limitBytes -1', () => {
    const c = parseConfig({ users: [{ name: 'u.1_x', password: 'p', mainAccount: 'm' }] }, { env: {} });
    assert.deepEqual(c.users[0], {
      name: 'u.1_x',
      password: 'p',
      mainAccount: 'm',
      product: '',
      draw: 'pwd',
      sessTime: 5,
      limitBytes: -1,
      // users as data (src/users/record.ts)
      rateBytesPerSec: 0,
      maxConnections: 0,
      expiresAt: null,
      enabled: true,
      metrics: false,
    });
    assert.equal(c.billing.timezone, 'UTC');
    assert.equal(c.metrics.userSeriesMax, 100);
    assert.throws(() => parseConfig({ billing: { timezone: 'Mars/Olympus' } }, { env: {} }), /billing\.timezone/);
    assert.throws(
      () => parseConfig({ proxy: { requestRules: [{ body: '.*captcha', action: 'tag' }] } }, { env: {} }),
      /proxy\.requestRules\.0\.body: body pattern refused: unbounded repetition/,
    );
  });

  test('environment overrides win over the file', () => {
    const file = write(
      'remote.yaml',
      `platform:\n  mode: remote\n  baseUrl: http://file.example:1\n  appKey: filekey\n  appSecret: ${SECRET16}\nproxy:\n  http: { port: 1 }\nstore:\n  path: file.db\n`,
    );
    const env = {
      ROTOR_BASE_URL: 'http://127.0.0.1:5000',
      ROTOR_APP_KEY: 'envkey',
      ROTOR_APP_SECRET: 'x'.repeat(32),
      ROTOR_HTTP_PORT: '18080',
      ROTOR_SOCKS_PORT: '11080',
      ROTOR_ADMIN_PORT: '19090',
      ROTOR_ADMIN_TOKEN: 'tok',
      ROTOR_CALLBACK_PORT: '19091',
      ROTOR_STORE: 'redis://127.0.0.1:6379/0',
      ROTOR_LOG_LEVEL: 'debug',
    };
    const c = loadConfig({ file, env });
    assert.equal(c.platform.baseUrl, 'http://127.0.0.1:5000');
    assert.equal(c.platform.appKey, 'envkey');
    assert.equal(c.platform.appSecret, 'x'.repeat(32));
    assert.equal(c.proxy.http.port, 18080);
    assert.equal(c.proxy.http.host, '127.0.0.1');
    assert.equal(c.proxy.socks5.port, 11080);
    assert.equal(c.admin.port, 19090);
    assert.equal(c.admin.token, 'tok');
    assert.equal(c.callback.port, 19091);
    assert.equal(c.store.path, 'redis://127.0.0.1:6379/0');
    assert.equal(c.log.level, 'debug');
    // Empty variables are ignored.
    assert.equal(loadConfig({ file, env: { ROTOR_APP_KEY: '' } }).platform.appKey, 'filekey');
  });

  test('ROTOR_CONFIG picks the file when no --config is given; --config wins over it', () => {
    const a = write('a.yaml', 'store: { path: a.db }\n');
    const b = write('b.yaml', 'store: { path: b.db }\n');
    assert.equal(loadConfig({ env: { ROTOR_CONFIG: a } }).store.path, 'a.db');
    assert.equal(loadConfig({ file: b, env: { ROTOR_CONFIG: a } }).store.path, 'b.db');
    assert.equal(resolveConfigFile({ env: {} }).endsWith('config/default.yaml'), true);
  });

  test('errors name the key and the problem', () => {
    const cases: [unknown, Record<string, string>, string, RegExp][] = [
      [{ platform: { appSecret: 'short' } }, {}, 'platform.appSecret', /must be 16, 24 or 32 bytes \(got 5\)/],
      [{ platform: { mode: 'remote', appKey: 'k', appSecret: SECRET16 } }, {}, 'platform.baseUrl', /required when platform.mode is remote/],
      [{ platform: { mode: 'remote', baseUrl: 'http://127.0.0.1:1', appSecret: SECRET16 } }, {}, 'platform.appKey', /required/],
      [{ platform: { mode: 'remote', baseUrl: 'http://127.0.0.1:1', appKey: 'k' } }, {}, 'platform.appSecret', /required/],
      [{ platform: { baseUrl: 'ftp://x' } }, {}, 'platform.baseUrl', /http/],
      [{ platform: { mode: 'cloud' } }, {}, 'platform.mode', /embedded|remote/],
      [{ platform: { version: '3' } }, {}, 'platform.version', /v2/],
      [{ platform: { timeZone: 'Mars/Olympus' } }, {}, 'platform.timeZone', /IANA time zone .* or an offset like \+08:00/],
      [{ platform: { timeZone: '+15:00' } }, {}, 'platform.timeZone', /an offset like/],
      [{ platform: { appsecret: SECRET16 } }, {}, 'platform.appsecret', /unknown key/],
      [{ proxy: { http: { port: 70000 } } }, {}, 'proxy.http.port', /65535/],
      [{ admin: { host: '0.0.0.0' } }, {}, 'admin.token', /required when admin.host \(0.0.0.0\) is not a loopback/],
      [{ callback: { path: 'callback' } }, {}, 'callback.path', /must start with '\/'/],
      [{ log: { level: 'loud' } }, {}, 'log.level', /info/],
      [{ users: [{ name: 'al-ice', password: 'p', mainAccount: 'm' }] }, {}, 'users.0.name', /'-' separates/],
      [
        {
          users: [
            { name: 'a', password: 'p', mainAccount: 'm' },
            { name: 'a', password: 'q', mainAccount: 'm' },
          ],
        },
        {},
        'users.1.name',
        /duplicate/,
      ],
      [{ users: [{ name: 'a', mainAccount: 'm' }] }, {}, 'users.0.password', /^required \(string\)$/],
      [{ users: [{ name: 'a', password: 'p', mainAccount: 'm', draw: 'magic' }] }, {}, 'users.0.draw', /pwd|api/],
      [{ users: [{ name: 'a', password: 'p', mainAccount: 'm', sessTime: 121 }] }, {}, 'users.0.sessTime', /120/],
      [{ users: [{ name: 'a', password: 'p', mainAccount: 'm', limitBytes: -2 }] }, {}, 'users.0.limitBytes', /-1/],
      [{}, { ROTOR_HTTP_PORT: 'eighty' }, 'proxy.http.port', /number/],
      [{}, { ROTOR_APP_SECRET: 'tooshort' }, 'platform.appSecret', /16, 24 or 32/],
    ];
    for (const [raw, env, key, problem] of cases) {
      const err = issuesOf(() => parseConfig(raw, { env }));
      const issue = err.issues.find((i) => i.key === key);
      assert.ok(issue, `${key} not named in ${JSON.stringify(err.issues)}`);
      assert.match(issue.problem, problem, key);
      assert.ok(err.message.includes(key), err.message);
    }
  });

  test('a value from the environment is reported with the variable name, and secrets never appear in errors', () => {
    const err = issuesOf(() => parseConfig({}, { env: { ROTOR_APP_SECRET: 'secret-of-17bytes' } }));
    assert.equal(err.issues[0]?.env, 'ROTOR_APP_SECRET');
    assert.match(err.message, /platform\.appSecret \(from ROTOR_APP_SECRET\): must be 16, 24 or 32 bytes \(got 17\)/);
    assert.ok(!err.message.includes('secret-of-17bytes'));
  });

  test('the admin token may be empty on loopback hosts only', () => {
    for (const host of ['127.0.0.1', '127.8.9.10', '::1', '[::1]', 'localhost']) {
      assert.equal(parseConfig({ admin: { host } }, { env: {} }).admin.token, '', host);
      assert.equal(isLoopbackHost(host), true, host);
    }
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'example.org']) assert.equal(isLoopbackHost(host), false, host);
    assert.equal(parseConfig({ admin: { host: '0.0.0.0', token: 't' } }, { env: {} }).admin.token, 't');
  });

  test('file problems: missing file, bad YAML, not a mapping', () => {
    let err = issuesOf(() => loadConfig({ file: join(dir, 'nope.yaml'), env: {} }));
    assert.match(err.message, /config file not found/);
    assert.match(err.message, /nope\.yaml/);
    err = issuesOf(() => loadConfig({ file: write('bad.yaml', 'platform: [\n'), env: {} }));
    assert.match(err.message, /YAML/);
    err = issuesOf(() => loadConfig({ file: write('list.yaml', '- a\n- b\n'), env: {} }));
    assert.match(err.message, /mapping/);
  });

  test('redactConfig masks the secret, token, user passwords and URL passwords; leaves the rest', () => {
    const c = parseConfig(
      {
        platform: { mode: 'remote', baseUrl: 'https://u:urlpass@platform.example/', appKey: 'key1', appSecret: SECRET16 },
        admin: { token: 'admintoken' },
        store: { path: 'redis://:redispass@127.0.0.1:6379/0' },
        users: [{ name: 'alice', password: 'alice-pass', mainAccount: 'shop1' }],
      },
      { env: {} },
    );
    const r = redactConfig(c);
    const text = JSON.stringify(r);
    for (const secret of [SECRET16, 'admintoken', 'alice-pass', 'urlpass', 'redispass']) assert.ok(!text.includes(secret), secret);
    assert.equal(r.platform.appSecret, '***');
    assert.equal(r.admin.token, '***');
    assert.equal(r.users[0]?.password, '***');
    assert.equal(r.platform.appKey, 'key1');
    assert.equal(r.store.path, 'redis://:***@127.0.0.1:6379/0');
    assert.equal(c.platform.appSecret, SECRET16, 'the original is untouched');
    assert.equal(redactConfig(parseConfig({}, { env: {} })).platform.appSecret, '', 'an unset secret stays visibly unset');
  });

  // review17 #11: check-config printed pool.healthCheck.url's and platform.sandbox.drawnLines' passwords in clear.
  test('redactConfig masks the password of every URL and proxy string, wherever the key', () => {
    const c = parseConfig(
      {
        platform: {
          sandbox: {
            drawnLines: {
              'DYN-104-FLOW': ['socks5://u1:p1secret@127.0.0.1:18601', 'u2:p2secret@127.0.0.1:18602', '127.0.0.1:18603:u3:p3secret'],
            },
          },
        },
        pool: { healthCheck: { url: 'https://probe:s3cr3t@127.0.0.1:9/check' } },
        events: { webhookUrl: 'https://hook:wsecret@127.0.0.1:9/h', secret: 'hooksecret' },
      },
      { env: {} },
    );
    const r = redactConfig(c);
    const text = JSON.stringify(r);
    for (const secret of ['p1secret', 'p2secret', 'p3secret', 's3cr3t', 'wsecret']) assert.ok(!text.includes(secret), secret);
    assert.equal(r.pool.healthCheck.url, 'https://probe:***@127.0.0.1:9/check');
    assert.deepEqual(r.platform.sandbox.drawnLines['DYN-104-FLOW'], [
      'socks5://u1:***@127.0.0.1:18601',
      'u2:***@127.0.0.1:18602',
      '127.0.0.1:18603:u3:***',
    ]);
    // What carries no credential is shown as it is.
    assert.equal(r.proxy.http.host, c.proxy.http.host);
    assert.equal(r.platform.baseUrl, c.platform.baseUrl);
    assert.equal(
      redactConfig(parseConfig({ pool: { healthCheck: { url: 'https://probe@127.0.0.1:9/c' } } }, { env: {} })).pool.healthCheck.url,
      'https://probe@127.0.0.1:9/c',
    );
    assert.equal(c.pool.healthCheck.url, 'https://probe:s3cr3t@127.0.0.1:9/check', 'the original is untouched');
  });
});
