// Many users at once (docs/reference.md "Users at scale"): POST /v1/users/batch on a real daemon validates each
// row on its own (bad rows, duplicates and existing names come back with index, name, code and message
// while the other rows are created), returns generated passwords once, takes a pre-made scrypt
// `passwordHash`; every created user then authenticates on the SOCKS5 listener with its password (and not
// with another). `rotor users import FILE` (a child process) sends a CSV with a header row and a JSON file
// through the same route, prints the generated passwords as CSV and names each failed row by its line.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runRotorCommand } from '../support/rotor-process.ts';
import { after, before, describe, test } from 'node:test';
import { hashPasswordAsync } from '../../src/admission/password.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import { startGateway, type Gateway } from './harness.ts';

const TOKEN = 'users-batch-token-Zk30';

interface BatchAnswer {
  created: number;
  errors: { index: number; name: string | null; code: string; message: string }[];
  passwords: Record<string, string>;
}

/** SOCKS5 user/password authentication against the listener: true when accepted (whatever the dial's fate). */
/**
 * Whether Rotor's SOCKS5 listener accepts the credentials: true once past authentication (the CONNECT to the
 * closed port 9 may then be refused), false on an authentication refusal. A reply cut short (a loaded machine)
 * is asked again, and after three such answers the test fails with it instead of reading it either way.
 */
async function socksAuth(port: number, user: string, pass: string): Promise<boolean> {
  let last: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const answer = await new Promise<{ err: { code?: string } | null }>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port });
      s.once('error', reject);
      s.once('connect', () => {
        socks5Connect(s, { host: '127.0.0.1', port: 9 }, { username: user, password: pass }, (err) => {
          s.destroy();
          resolve({ err: err ?? null });
        });
      });
    });
    if (!answer.err || answer.err.code === 'REJECTED') return true;
    if (answer.err.code === 'AUTH_FAILED') return false;
    last = answer.err;
  }
  throw last;
}

const rotorUsers = (args: string[]) => runRotorCommand(['users', ...args]);

describe('users in bulk', () => {
  let gw: Gateway;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rotor-batch-'));
    gw = await startGateway({ config: { admin: { token: TOKEN } } });
  });
  after(async () => {
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('POST /v1/users/batch: per-row errors, the other rows created, generated passwords once, passwordHash taken', async () => {
    const rows: unknown[] = [
      { name: 'bulk1', mainAccount: 'shop1' },
      { name: 'bulk2', password: 'chosen-pass-2', mainAccount: 'shop1', quota: { bytes: 50_000_000, period: 'total' } },
      { name: 'bad-name', mainAccount: 'shop1' },
      { name: 'bulk1', mainAccount: 'shop1' },
      { name: 'alice', mainAccount: 'shop1' },
      {
        name: 'bulk3',
        passwordHash: await hashPasswordAsync('hashed-pass-3'),
        mainAccount: 'shop1',
        quota: { bytes: 10_000_000, period: 'month' },
      },
      {
        name: 'bulk4',
        passwordHash: 'scrypt$1024$8$1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U=',
        mainAccount: 'shop1',
      },
      { name: 'bulk5', password: 'x', passwordHash: await hashPasswordAsync('y'), mainAccount: 'shop1' },
      {},
      { name: 'bulk6', mainAccount: 'shop1', sessTime: 'long' },
      { name: 'bulk7', mainAccount: 'shop1', enabled: false },
    ];
    const res = await gw.admin<BatchAnswer>('/v1/users/batch', { body: { users: rows } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const { created, errors, passwords } = res.body;
    assert.equal(created, 4, JSON.stringify(errors));
    assert.deepEqual(
      errors.map((e) => [e.index, e.name, e.code]),
      [
        [2, 'bad-name', 'INVALID_INPUT'],
        [3, 'bulk1', 'USER_EXISTS'],
        [4, 'alice', 'USER_EXISTS'],
        [6, 'bulk4', 'INVALID_INPUT'],
        [7, 'bulk5', 'INVALID_INPUT'],
        [8, null, 'INVALID_INPUT'],
        [9, 'bulk6', 'INVALID_INPUT'],
      ],
    );
    assert.match(errors.find((e) => e.index === 9)!.message, /sessTime/);
    assert.match(errors.find((e) => e.index === 6)!.message, /N must be/);
    assert.deepEqual(Object.keys(passwords).sort(), ['bulk1', 'bulk7']);
    assert.match(passwords.bulk1!, /^[A-Za-z0-9_-]{24}$/);

    for (const name of ['bulk1', 'bulk2', 'bulk3', 'bulk7']) {
      const one = await gw.admin<{ state: string; source: string }>(`/v1/users/${name}`);
      assert.equal(one.status, 200, name);
      assert.equal(one.body.state, 'ready');
    }
    assert.equal((await gw.admin('/v1/users/bulk4')).status, 404);
    assert.equal((await gw.admin('/v1/users/bulk6')).status, 404);
    // The generated password (kept as a SHA-256), the chosen one and the pre-hashed one all authenticate.
    const socks = gw.ports.socks5;
    assert.equal(await socksAuth(socks, 'bulk1', passwords.bulk1!), true);
    // One character changed (a generated password may already end in 'x': 1 in 64).
    const wrong = `${passwords.bulk1!.slice(0, -1)}${passwords.bulk1!.endsWith('x') ? 'y' : 'x'}`;
    assert.equal(await socksAuth(socks, 'bulk1', wrong), false);
    assert.equal(await socksAuth(socks, 'bulk2', 'chosen-pass-2'), true);
    assert.equal(await socksAuth(socks, 'bulk2', 'chosen-pass-3'), false);
    assert.equal(await socksAuth(socks, 'bulk3', 'hashed-pass-3'), true);
    assert.equal(await socksAuth(socks, 'bulk3', 'hashed-pass-4'), false);
    // A single creation's generated password is a SHA-256 too, and works.
    const single = await gw.admin<{ password: string }>('/v1/users', { body: { name: 'single1', mainAccount: 'shop1' } });
    assert.equal(single.status, 201);
    assert.equal(await socksAuth(socks, 'single1', single.body.password), true);
    assert.equal(await socksAuth(socks, 'single1', 'not-it'), false);

    assert.equal((await gw.admin('/v1/users/batch', { body: { users: [] } })).status, 400);
    assert.equal((await gw.admin('/v1/users/batch', { body: { rows: [{}] } })).status, 400);
  });

  test('rotor users import: a CSV (header row, quoted cells, nested columns) and a JSON file through the daemon', async () => {
    const csv = join(dir, 'users.csv');
    writeFileSync(
      csv,
      [
        'name,mainAccount,password,quota.bytes,quota.period,enabled,rules',
        'csv1,shop1,,1000000000,month,true,',
        'csv2,shop1,"pass,with ""quotes""",,,false,"{""denyPorts"":[25]}"',
        'csv-bad,shop1,,,,,',
        'csv3,shop1,,abc,,,',
        '',
      ].join('\r\n'),
    );
    const admin = `http://127.0.0.1:${gw.ports.admin}`;
    const run = await rotorUsers(['import', csv, '--admin', admin, '--token', TOKEN]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /line 4 \(csv-bad\): INVALID_INPUT/);
    assert.match(run.stderr, /line 5 \(csv3\): INVALID_INPUT: quota\.bytes/);
    assert.match(run.stderr, /imported 2 of 4 users/);
    const lines = run.stdout.trim().split('\n');
    assert.equal(lines[0], 'name,password');
    assert.equal(lines.length, 2);
    const [name, pw] = lines[1]!.split(',');
    assert.equal(name, 'csv1');
    assert.equal(await socksAuth(gw.ports.socks5, 'csv1', pw!), true);
    assert.equal(await socksAuth(gw.ports.socks5, 'csv2', 'pass,with "quotes"'), true);
    const csv2 = await gw.admin<{ enabled: boolean; rules: { denyPorts: number[] } }>('/v1/users/csv2');
    assert.equal(csv2.body.enabled, false);
    assert.deepEqual(csv2.body.rules.denyPorts, [25]);
    const csv1 = await gw.admin<{ quota: { bytes: number; period: string } }>('/v1/users/csv1');
    assert.deepEqual(csv1.body.quota, { bytes: 1_000_000_000, period: 'month' });

    const json = join(dir, 'users.json');
    writeFileSync(json, JSON.stringify({ users: Array.from({ length: 25 }, (_, i) => ({ name: `js${i}`, mainAccount: 'shop1' })) }));
    const out = join(dir, 'passwords.csv');
    const ok = await rotorUsers(['import', json, '--admin', admin, '--token', TOKEN, '--batch', '10', '--passwords', out]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.stdout, '');
    assert.match(ok.stderr, /imported 25 of 25 users/);
    assert.equal(statSync(out).mode & 0o777, 0o600);
    assert.equal(readFileSync(out, 'utf8').trim().split('\n').length, 26);
    const listed = await gw.admin<unknown[]>('/v1/users?prefix=js&limit=1000');
    assert.equal(listed.body.length, 25);

    const refused = await rotorUsers(['import', json, '--admin', admin, '--token', 'wrong-token']);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /admin\.token/);
  });
});
