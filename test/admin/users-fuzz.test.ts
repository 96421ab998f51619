// Fuzzing the users routes: 2,400 malformed (and a few well-formed) bodies, seeded so a failure replays,
// through the real admin server (fastify inject) over the real users directory, store and sandbox. Every
// answer must be an answer of the contract — 2xx, 400, 404, 409, 413, 415 in the error shape — never a 500,
// and the server must still serve a normal request afterwards.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { seededRandom } from '../../src/sim/platform/random.ts';
import { int, pick, type Rnd } from '../reliability/generators.ts';
import { AUTH, startHarness, type Harness } from './harness.ts';

let h: Harness;
before(async () => {
  h = await startHarness();
});
after(async () => {
  await h.close();
});

const FIELDS = [
  'name',
  'password',
  'mainAccount',
  'product',
  'draw',
  'sessTime',
  'quota',
  'rateBytesPerSec',
  'maxConnections',
  'expiresAt',
  'enabled',
  'pricePerGb',
  'listen',
  'rules',
  'metrics',
  'limitBytes',
  'bogus',
  '__proto__',
  'constructor',
];

function scalar(rnd: Rnd): unknown {
  return pick(rnd, [
    null,
    true,
    false,
    0,
    -1,
    -2,
    1.5,
    1e308,
    -1e308,
    Number.MAX_SAFE_INTEGER + 2,
    '',
    'x',
    'a'.repeat(300),
    'shop1',
    'day',
    'week',
    'total',
    'month',
    'yearly',
    '2026-12-31T23:59:59Z',
    '2026-13-45T99:99:99Z',
    'not a date',
    '127.0.0.1/33',
    '::1/128',
    '*.example.com',
    '../../etc',
    '\u0000\uffff',
    '😀',
    'ca-t',
    65_536,
    25,
    [],
    {},
  ]);
}

function value(rnd: Rnd, depth: number): unknown {
  if (depth > 3 || rnd() < 0.5) return scalar(rnd);
  if (rnd() < 0.4) return Array.from({ length: int(rnd, 5) }, () => value(rnd, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = int(rnd, 5); i > 0; i--)
    o[pick(rnd, ['bytes', 'period', 'port', 'allowIps', 'denyPorts', 'denyHosts', 'allowPorts', 'allowHosts', 'x'])] = value(
      rnd,
      depth + 1,
    );
  return o;
}

/** A body: mostly plausible records with one or more fields wrong, sometimes not JSON at all. */
function body(rnd: Rnd, n: number): { payload: string; contentType: string } {
  const kind = int(rnd, 10);
  if (kind === 0)
    return {
      payload: pick(rnd, ['', '{', '{"name":', 'null', '[]', '"x"', '1', '{"a":1}}', '\u0000'.repeat(10)]),
      contentType: 'application/json',
    };
  if (kind === 1) return { payload: 'name=x&mainAccount=y', contentType: pick(rnd, ['application/x-www-form-urlencoded', 'text/plain']) };
  const o: Record<string, unknown> = rnd() < 0.7 ? { name: `fz${n}`, mainAccount: 'shop1', password: 'fuzz-pass' } : {};
  for (let i = 1 + int(rnd, 4); i > 0; i--) o[pick(rnd, FIELDS)] = value(rnd, 0);
  return { payload: JSON.stringify(o), contentType: 'application/json' };
}

test('2,400 malformed bodies on the users routes: no crash, every answer in the contract', { timeout: 600_000 }, async () => {
  const rnd = seededRandom(15_2026);
  const statuses = new Map<number, number>();
  const routes = [
    { method: 'POST', url: '/v1/users' },
    { method: 'PATCH', url: '/v1/users/alice' },
    { method: 'PATCH', url: '/v1/users/nobody' },
    { method: 'POST', url: '/v1/users/bob/password' },
    { method: 'PUT', url: '/v1/users/bob/limit' },
    { method: 'PATCH', url: `/v1/users/${encodeURIComponent('bad name!')}` },
  ] as const;
  for (let n = 0; n < 2400; n++) {
    const route = routes[n % routes.length]!;
    const b = body(rnd, n);
    const r = await h.app.inject({
      method: route.method,
      url: route.url,
      payload: b.payload,
      headers: { ...AUTH, 'content-type': b.contentType },
    });
    statuses.set(r.statusCode, (statuses.get(r.statusCode) ?? 0) + 1);
    assert.ok(
      [200, 201, 204, 400, 404, 409, 413, 415, 502].includes(r.statusCode),
      `#${n} ${route.method} ${route.url} ${b.payload.slice(0, 200)} → ${r.statusCode} ${r.body}`,
    );
    if (r.statusCode >= 400) {
      const e = r.json() as { error?: { code?: string; message?: string } };
      assert.ok(e.error?.code && e.error.message, `#${n}: error shape: ${r.body}`);
    }
  }
  console.log(`# users fuzz: ${[...statuses].map(([s, c]) => `${s}×${c}`).join(' ')}`);
  assert.ok((statuses.get(400) ?? 0) > 1500, 'most bodies are refused as invalid');
  // Still serving, and the seeded users are intact.
  const list = await h.app.inject({ method: 'GET', url: '/v1/users?source=config', headers: AUTH });
  assert.equal(list.statusCode, 200);
  assert.deepEqual(
    (list.json() as { name: string }[]).map((u) => u.name),
    ['alice', 'bob'],
  );
});
