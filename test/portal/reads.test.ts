// One signed-in customer's cost to the connection log's store through the portal is bounded (src/portal/reads.ts):
// a loop over the usage route with ever-new windows gets its burst of reads, then 429 SLOW_DOWN with Retry-After
// (no store read), another customer unaffected; the page's 5-s poll of its connections, from several tabs at once,
// shares one read. Before, every request was a store read, and on a Redis log each one reads every customer's
// records (review12 #1: 100,500 records for one poll). Unit cases on a clock of the test's own; real daemon after.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { CustomerReads, SlowDownError } from '../../src/portal/reads.ts';
import { startGateway, type Gateway } from '../e2e/harness.ts';

describe('CustomerReads', () => {
  test('a burst, then one read every 2 s per customer; others unaffected; one read shared while in flight; kept answers', async () => {
    let now = 0;
    const r = new CustomerReads({ burst: 3, everyMs: 2000, keepMs: 4000, now: () => now });
    let loads = 0;
    const load = async (): Promise<number> => ++loads;
    for (let i = 0; i < 3; i++) await r.read('alice', `q${i}`, load);
    assert.throws(
      () => r.read('alice', 'q3', load),
      (e: unknown) => e instanceof SlowDownError && e.retryAfterSeconds === 2,
    );
    assert.equal(loads, 3, 'a refused read does not reach the store');
    assert.equal(await r.read('bob', 'q0', load), 4, 'another customer has its own bucket');
    now += 2000;
    await r.read('alice', 'q4', load);
    assert.throws(() => r.read('alice', 'q5', load), SlowDownError);
    // Shared while in flight: two asks, one load.
    now += 10_000;
    let release!: (v: string) => void;
    let slow = 0;
    const pending = (): Promise<string> => {
      slow++;
      return new Promise((res) => (release = res));
    };
    const a = r.read('carol', 'same', pending);
    const b = r.read('carol', 'same', pending);
    release('answer');
    assert.deepEqual(await Promise.all([a, b]), ['answer', 'answer']);
    assert.equal(slow, 1);
    // Kept: the same query within keepMs answered without a read or a token.
    const before = loads;
    for (let i = 0; i < 10; i++) await r.read('dave', 'poll', load, true);
    assert.equal(loads, before + 1);
    now += 4000;
    await r.read('dave', 'poll', load, true);
    assert.equal(loads, before + 2, 'read again once kept for keepMs');
  });
});

describe('the portal under a reading loop (real daemon)', () => {
  let gw: Gateway;
  const cookies: Record<string, string> = {};

  const call = (
    method: string,
    path: string,
    opts: { body?: unknown; cookie?: string; from?: string } = {},
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> =>
    new Promise((resolve, reject) => {
      const url = new URL(`${gw.adminUrl}${gw.config.portal.path}api/${path}`);
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname + url.search,
          method,
          agent: false,
          ...(opts.from ? { localAddress: opts.from } : {}),
          headers: { 'content-type': 'application/json', ...(opts.cookie ? { cookie: opts.cookie } : {}) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
        },
      );
      req.on('error', reject);
      req.end(opts.body === undefined ? undefined : JSON.stringify(opts.body));
    });

  before(async () => {
    gw = await startGateway();
    for (const [i, user] of ['reader1', 'reader2'].entries()) {
      const password = `${user}-pass-9876`;
      assert.equal((await gw.admin('/v1/users', { body: { name: user, mainAccount: 'shop1', password } })).status, 201);
      const login = await call('POST', 'login', { body: { user, password }, from: `127.0.2.${i + 1}` });
      assert.equal(login.status, 204, login.body);
      cookies[user] = /^(rotor_portal=[A-Za-z0-9_-]+)/.exec(String(login.headers['set-cookie']))![1]!;
    }
  });
  after(async () => {
    await gw?.close();
  });

  test('30 usage reads with new windows: 10 answered, the rest 429 SLOW_DOWN with Retry-After; another customer still served', async () => {
    const t = Date.UTC(2026, 10, 1);
    const statuses: number[] = [];
    let refused: { status: number; headers: Record<string, string | string[] | undefined>; body: string } | undefined;
    for (let i = 0; i < 30; i++) {
      const from = new Date(t + i * 3_600_000).toISOString();
      const to = new Date(t + (i + 24) * 3_600_000).toISOString();
      const r = await call('GET', `usage?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`, { cookie: cookies.reader1 });
      statuses.push(r.status);
      if (r.status === 429) refused ??= r;
    }
    const served = statuses.filter((s) => s === 200).length;
    // A loaded machine may take seconds over the loop: the bucket refills one read every 2 s meanwhile.
    assert.ok(served >= 10 && served <= 20, `served ${served} of 30: ${JSON.stringify(statuses)}`);
    assert.ok(refused, 'some refused');
    assert.equal((JSON.parse(refused.body) as { error: { code: string } }).error.code, 'SLOW_DOWN');
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    assert.equal((await call('GET', 'usage', { cookie: cookies.reader2 })).status, 200, 'another customer');
  });

  test("the connections poll from 4 tabs at once, 5 rounds: all answered (the store's answer is shared)", async () => {
    for (let round = 0; round < 5; round++) {
      const answers = await Promise.all(Array.from({ length: 4 }, () => call('GET', 'connections?limit=20', { cookie: cookies.reader2 })));
      assert.deepEqual(
        answers.map((a) => a.status),
        [200, 200, 200, 200],
      );
    }
  });
});
