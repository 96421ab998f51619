// GET /v1/users paged by default (docs/reference.md "Users at scale"): 1,200 users written to the store before a
// real daemon starts on it; the admin API answers pages of 100 (default) or up to 1,000, with the
// x-next-cursor header leading through every user exactly once, in name order or in usage order, a name
// prefix searching server-side and x-total-count counting every match.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { hashPasswordAsync } from '../../src/admission/password.ts';
import { openTestStore } from '../support/store.ts';
import { startGateway, type Gateway } from './harness.ts';

const COUNT = 1_200;
const name = (i: number) => `u${String(i).padStart(5, '0')}`;

interface Row {
  name: string;
  usedBytes: number;
}

describe('GET /v1/users at more users than a page', () => {
  let gw: Gateway;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rotor-paging-'));
    const path = join(dir, 'rotor.db');
    const store = await openTestStore(path);
    const hash = await hashPasswordAsync('paging-password');
    for (let i = 0; i < COUNT; i++) {
      await store.putUser({
        name: name(i),
        data: { name: name(i), mainAccount: 'shop1', source: 'api', createdAt: 1, enabled: i % 4 !== 0 },
        passwordHash: hash,
        state: 'ready',
      });
    }
    // Usage for every 7th user: i * 1000 bytes (so usage order is known).
    await store.addUsage(
      Array.from({ length: COUNT }, (_, i) => i)
        .filter((i) => i % 7 === 0 && i > 0)
        .map((i) => ({ user: name(i), bytes: i * 1000 })),
    );
    await store.close();
    gw = await startGateway({ config: { store: { path } } });
  });
  after(async () => {
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const page = async (query: string) => {
    const res = await fetch(`${gw.adminUrl}/v1/users${query}`, { headers: { authorization: `Bearer ${gw.config.admin.token}` } });
    assert.equal(res.status, 200, await res.clone().text());
    return { rows: (await res.json()) as Row[], next: res.headers.get('x-next-cursor'), total: Number(res.headers.get('x-total-count')) };
  };

  test('a default page is 100 users in name order; the cursors lead through every user once', async () => {
    const first = await page('');
    const all = (await gw.admin<Row[]>('/v1/users?limit=1000')).body;
    assert.equal(first.rows.length, 100);
    assert.ok(first.total >= COUNT + 1, `x-total-count ${first.total}`);
    assert.equal(first.next, first.rows[99]!.name);
    const seen: string[] = [];
    let cursor: string | null = '';
    while (cursor !== null) {
      const p = await page(`?limit=1000${cursor ? `&after=${encodeURIComponent(cursor)}` : ''}`);
      assert.ok(p.rows.length <= 1000);
      seen.push(...p.rows.map((r) => r.name));
      cursor = p.next;
    }
    assert.equal(seen.length, first.total);
    assert.deepEqual(seen, [...seen].sort());
    assert.equal(new Set(seen).size, seen.length);
    for (let i = 0; i < COUNT; i++) assert.ok(seen.includes(name(i)), name(i));
    assert.deepEqual(
      all.slice(0, 100).map((r) => r.name),
      first.rows.map((r) => r.name),
    );
  });

  test('limit over 1,000 is refused; a prefix searches names and counts its matches; filters apply', async () => {
    assert.equal((await gw.admin('/v1/users?limit=1001')).status, 400);
    assert.equal((await gw.admin('/v1/users?sort=size')).status, 400);
    const p = await page('?prefix=u010');
    assert.equal(p.total, 100);
    assert.equal(p.rows.length, 100);
    assert.equal(p.next, null);
    assert.ok(p.rows.every((r) => r.name.startsWith('u010')));
    const small = await page('?prefix=u010&limit=30&after=u01050');
    assert.deepEqual(
      small.rows.map((r) => r.name),
      Array.from({ length: 30 }, (_, i) => name(1051 + i)),
    );
    assert.equal(small.next, name(1080));
    assert.equal(small.total, 100);
    const disabled = await page('?enabled=false&limit=1000&prefix=u');
    assert.equal(disabled.total, COUNT / 4);
    assert.ok(disabled.rows.every((r) => Number(r.name.slice(1)) % 4 === 0));
    assert.equal((await page('?prefix=nobody')).rows.length, 0);
  });

  test('sort=usage: most bytes first, then names; its cursor pages on without repeats', async () => {
    const first = await page('?sort=usage&limit=50&prefix=u');
    const expected = Array.from({ length: COUNT }, (_, i) => i)
      .filter((i) => i % 7 === 0 && i > 0)
      .sort((a, b) => b - a)
      .map(name);
    assert.deepEqual(
      first.rows.slice(0, 50).map((r) => r.name),
      expected.slice(0, 50),
    );
    assert.equal(first.rows[0]!.usedBytes, Number(first.rows[0]!.name.slice(1)) * 1000);
    assert.ok(first.next);
    const names: string[] = first.rows.map((r) => r.name);
    let cursor: string | null = first.next;
    while (cursor !== null) {
      const p = await page(`?sort=usage&limit=200&prefix=u&after=${encodeURIComponent(cursor)}`);
      names.push(...p.rows.map((r) => r.name));
      cursor = p.next;
    }
    assert.equal(names.length, COUNT);
    assert.equal(new Set(names).size, COUNT);
    assert.deepEqual(names.slice(0, expected.length), expected);
    // The users without usage follow in name order.
    const rest = names.slice(expected.length);
    assert.deepEqual(rest, [...rest].sort());
  });
});
