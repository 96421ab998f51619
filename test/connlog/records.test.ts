// Issue 16 end to end: the real daemon on the embedded sandbox, real clients (curl in SOCKS5, CONNECT and
// plain-HTTP modes, Rotor's own SOCKS5 client on raw sockets). Each kind of connection — ok, refused for
// auth, quota and rule, upstream error, client abort, closed through the API — leaves one record with the
// right result, and the bytes of a user's records equal that user's meter. Cursor paging, the live list,
// the id in the log lines, usage rollups (JSON and CSV against the meters) and the admin-route rules.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { startGateway, viaConnect, viaHttp, viaSocks5h, type Gateway } from '../e2e/harness.ts';
import { curl, startTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { captureLogger } from '../support/logger.ts';
import { waitFor } from '../support/wait.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import type { ConnectionRecord, LiveConnection } from '../../src/connlog/types.ts';

const TOKEN = 'connlog-test-token-81c2';
const QUOTA = 200_000;
const PRICE = 2.5;

interface Page {
  items: ConnectionRecord[];
  next: string | null;
}

/** One raw HTTP/1.1 request (absolute-form targets and odd paths that fetch() would normalise). */
function rawRequest(port: number, head: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect({ host: '127.0.0.1', port });
    let data = '';
    s.on('data', (c: Buffer) => (data += c.toString('utf8')));
    s.on('error', reject);
    s.on('end', () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0);
      resolve({ status, body: data.slice(data.indexOf('\r\n\r\n') + 4) });
    });
    s.write(`${head}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  });
}

describe('connection log: one record per connection, with the result and the meter bytes', () => {
  let gw: Gateway;
  let target: BytesTarget;
  const log = captureLogger('debug');
  const startedAt = Date.now();

  const records = async (query: string): Promise<ConnectionRecord[]> => {
    await gw.daemon.connections.recorder.flush({ refusals: true });
    const r = await gw.admin<Page>(`/v1/connections?${query}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.items;
  };
  const usedBytes = async (user: string): Promise<number> => {
    const r = await gw.admin<{ name: string; usedBytes: number }[]>('/v1/users');
    return r.body.find((u) => u.name === user)!.usedBytes;
  };
  /** A SOCKS5 CONNECT with Rotor's own client; resolves the socket once the reply is in (or the error). */
  const socksOpen = (user: string, pass: string, port: number): Promise<{ socket: Socket; err: Error | undefined }> =>
    new Promise((resolve) => {
      const socket = connect({ host: '127.0.0.1', port: gw.ports.socks5 });
      socket.on('error', () => undefined);
      socket.once('connect', () =>
        socks5Connect(socket, { host: '127.0.0.1', port }, { username: user, password: pass }, (err) =>
          resolve({ socket, err: err ?? undefined }),
        ),
      );
    });

  before(async () => {
    target = await startTarget();
    gw = await startGateway({
      config: {
        admin: { token: TOKEN },
        proxy: { connectTimeoutMs: 1500, retries: 1 },
        log: { level: 'debug', access: { flushIntervalMs: 60_000 } },
        billing: { currency: 'EUR', defaultPricePerGb: null },
        users: [
          { name: 'carol', password: 'carol-pw', mainAccount: 'shop1', pricePerGb: PRICE },
          { name: 'dave', password: 'dave-pw', mainAccount: 'shop1', limitBytes: QUOTA },
        ],
      },
      daemon: { logger: log.logger },
    });
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  test('ok over SOCKS5, CONNECT and plain HTTP: one record each, bytes equal the meter', async () => {
    const before = await usedBytes('carol');
    for (const via of [viaSocks5h, viaConnect, viaHttp]) {
      const r = await curl([...via(gw.ports[via === viaSocks5h ? 'socks5' : 'http'], 'carol', 'carol-pw'), target.url(100_000)]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.size, 100_000);
    }
    const got = await waitFor(
      async () => {
        const list = await records('user=carol&result=ok');
        return list.length >= 3 ? list : undefined;
      },
      10_000,
      'three ok records',
    );
    assert.equal(got.length, 3);
    assert.deepEqual(got.map((r) => r.listener).sort(), ['http', 'http', 'socks5']);
    for (const r of got) {
      assert.equal(r.user, 'carol');
      assert.equal(r.target, `127.0.0.1:${target.port}`);
      assert.ok(r.node && !r.node.includes('carol-pw'), `node id without a password: ${r.node}`);
      assert.ok(r.exit === undefined || gw.exits.includes(r.exit), `exit only as the upstream named it: ${r.exit}`);
      assert.equal(r.client, '127.0.0.1');
      assert.ok(r.bytesDown >= 100_000, `bytesDown ${r.bytesDown}`);
      assert.ok(r.bytesUp > 0);
      assert.ok(r.startedAt >= startedAt && r.durationMs >= 0);
      assert.equal(r.retries, 0);
      assert.equal(r.hedges, 0);
    }
    const sum = got.reduce((n, r) => n + r.bytesUp + r.bytesDown, 0);
    assert.equal(sum, (await usedBytes('carol')) - before, 'the records carry exactly the bytes the meter counted');
    assert.equal(new Set(got.map((r) => r.id)).size, 3);
  });

  test('refused for credentials: auth_failed, no user, and counted', async () => {
    const r = await curl([...viaSocks5h(gw.ports.socks5, 'carol', 'wrong'), target.url(10)]);
    assert.notEqual(r.code, 0);
    const h = await curl([...viaConnect(gw.ports.http, 'nobody', 'x'), target.url(10)]);
    assert.equal(h.connect, 407);
    const got = await records('result=auth_failed');
    assert.ok(got.length >= 2);
    assert.ok(got.every((x) => x.user === null && x.bytesUp === 0 && x.bytesDown === 0 && x.node === null));
    assert.ok(got.some((x) => x.listener === 'socks5') && got.some((x) => x.listener === 'http'));
  });

  test('a SOCKS5 client offering no usable method is auth_failed', async () => {
    const before = await gw.metric('rotor_proxy_connections_total', { listener: 'socks5', result: 'auth_failed' });
    const reply = await new Promise<Buffer>((resolve) => {
      const s = connect({ host: '127.0.0.1', port: gw.ports.socks5 });
      s.once('data', (b: Buffer) => {
        s.destroy();
        resolve(b);
      });
      s.write(Buffer.from([5, 1, 0])); // "no authentication" only
    });
    assert.deepEqual([...reply], [5, 0xff]);
    await waitFor(
      async () => (await gw.metric('rotor_proxy_connections_total', { listener: 'socks5', result: 'auth_failed' })) === before + 1,
      5000,
      'the count',
    );
  });

  test('quota: the connection cut at the limit and the next one refused are both recorded; bytes equal the meter', async () => {
    const first = await curl([...viaSocks5h(gw.ports.socks5, 'dave', 'dave-pw'), target.url(1_000_000)]);
    assert.ok(first.size < 1_000_000, 'cut at the quota');
    const second = await curl([...viaConnect(gw.ports.http, 'dave', 'dave-pw'), target.url(10)]);
    assert.equal(second.connect, 403);
    const all = await records('user=dave');
    const limited = all.filter((r) => r.result === 'limited');
    assert.equal(limited.length, 1);
    assert.match(limited[0]!.reason ?? '', /limit/);
    const ok = all.filter((r) => r.result === 'ok');
    assert.equal(ok.length, 1);
    assert.equal(ok[0]!.reason, 'limit');
    assert.equal(
      all.reduce((n, r) => n + r.bytesUp + r.bytesDown, 0),
      await usedBytes('dave'),
    );
  });

  test('rule: a target the user may not use is not_allowed', async () => {
    const code = await socksOpen('carol-instance-nosuch', 'carol-pw', target.port);
    code.socket.destroy();
    assert.ok(code.err, 'refused');
    const got = await records('result=not_allowed');
    assert.equal(got.length, 1);
    assert.equal(got[0]!.user, 'carol');
    assert.match(got[0]!.reason ?? '', /instance/);
  });

  test('upstream error: recorded with the failure, and the id is on the log line about it', async () => {
    gw.daemon.sim!.upstreams!.setFault('*', { mode: 'refuse' });
    try {
      const r = await curl([...viaSocks5h(gw.ports.socks5, 'carol', 'carol-pw'), target.url(10)]);
      assert.notEqual(r.code, 0);
    } finally {
      gw.daemon.sim!.upstreams!.setFault('*', null);
    }
    const got = await records('result=upstream_error');
    assert.equal(got.length, 1);
    const rec = got[0]!;
    assert.equal(rec.user, 'carol');
    assert.ok(rec.retries >= 1, `retried on another node (${rec.retries})`);
    const lines = log
      .text()
      .split('\n')
      .filter((l) => l.includes(`"conn":"${rec.id}"`));
    assert.ok(
      lines.some((l) => l.includes('socks5 connect failed')),
      'the failure line carries the connection id',
    );
    assert.ok(
      lines.some((l) => l.includes('upstream dial failed')),
      "the router's lines carry it too",
    );
  });

  test('client abort: a client that leaves mid-dial', async () => {
    gw.daemon.sim!.upstreams!.setFault('*', { mode: 'stall' });
    try {
      const s = connect({ host: '127.0.0.1', port: gw.ports.socks5 });
      s.on('error', () => undefined);
      s.once('connect', () =>
        socks5Connect(s, { host: '127.0.0.1', port: target.port }, { username: 'carol', password: 'carol-pw' }, () => undefined),
      );
      // Live while dialing: in the active list with its user and no bytes yet.
      const live = await waitFor(
        async () => (await gw.admin<LiveConnection[]>('/v1/connections/active')).body.find((c) => c.user === 'carol'),
        5000,
        'the live entry',
      );
      assert.equal(live.bytesDown, 0);
      s.destroy();
      const got = await waitFor(
        async () => {
          const list = await records('result=client_abort');
          return list.length > 0 ? list : undefined;
        },
        5000,
        'the client_abort record',
      );
      assert.equal(got[0]!.id, live.id, 'the live entry and the record are the same connection');
    } finally {
      gw.daemon.sim!.upstreams!.setFault('*', null);
    }
  });

  test('the live list shows bytes so far, and DELETE closes one connection (record reason killed)', async () => {
    const slow = curl([...viaSocks5h(gw.ports.socks5, 'carol', 'carol-pw'), target.url(5_000_000, 100_000)], { maxTimeS: 30 });
    const live = await waitFor(
      async () => (await gw.admin<LiveConnection[]>('/v1/connections/active')).body.find((c) => c.user === 'carol' && c.bytesDown > 0),
      10_000,
      'bytes so far',
    );
    assert.equal(live.listener, 'socks5');
    assert.equal(live.target, `127.0.0.1:${target.port}`);
    const del = await gw.admin(`/v1/connections/${live.id}`, { method: 'DELETE' });
    assert.equal(del.status, 200);
    const r = await slow;
    assert.ok(r.size < 5_000_000);
    const again = await gw.admin<{ error: { code: string } }>(`/v1/connections/${live.id}`, { method: 'DELETE' });
    assert.equal(again.status, 404);
    assert.equal(again.body.error.code, 'NOT_FOUND');
    const rec = (await records('user=carol&result=ok')).find((x) => x.id === live.id);
    assert.equal(rec?.reason, 'killed');
  });

  test('cursor paging: newest first, every record once', async () => {
    const all = await records('limit=1000');
    const seen: ConnectionRecord[] = [];
    let cursor: string | null = null;
    do {
      const r: { status: number; body: Page } = await gw.admin<Page>(`/v1/connections?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(r.status, 200);
      assert.ok(r.body.items.length <= 2);
      seen.push(...r.body.items);
      cursor = r.body.next;
    } while (cursor);
    assert.deepEqual(
      seen.map((r) => r.id),
      all.map((r) => r.id),
    );
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i - 1]!.startedAt >= seen[i]!.startedAt, 'newest first');
    const since = await records(`since=${new Date(all[1]!.startedAt).toISOString()}&limit=1000`);
    assert.ok(since.every((r) => r.startedAt >= all[1]!.startedAt));
    const bad = await gw.admin<{ error: { code: string; message: string } }>('/v1/connections?cursor=nonsense!');
    assert.equal(bad.status, 400);
    const badResult = await gw.admin<{ error: { code: string; message: string } }>('/v1/connections?result=maybe');
    assert.equal(badResult.status, 400);
    assert.match(badResult.body.error.message, /query\.result/);
  });

  test('usage: hour and day rollups equal the meters; CSV sums equal them too; amount from the price', async () => {
    await gw.daemon.connections.recorder.flush();
    const from = new Date(Math.floor(startedAt / 3_600_000) * 3_600_000).toISOString();
    const to = new Date(Date.now() + 3_600_000).toISOString();
    const meters = { carol: await usedBytes('carol'), dave: await usedBytes('dave') };
    for (const granularity of ['hour', 'day']) {
      const r = await gw.admin<
        { user: string; period: string; bytesUp: number; bytesDown: number; connections: number; failures: number; amount: number | null }[]
      >(`/v1/usage?from=${from}&to=${to}&granularity=${granularity}`);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      for (const user of ['carol', 'dave'] as const) {
        const rows = r.body.filter((x) => x.user === user);
        assert.equal(
          rows.reduce((n, x) => n + x.bytesUp + x.bytesDown, 0),
          meters[user],
          `${granularity} ${user}`,
        );
        assert.ok(rows.every((x) => !Number.isNaN(Date.parse(x.period))));
      }
      const carol = r.body.filter((x) => x.user === 'carol');
      assert.ok(carol.reduce((n, x) => n + x.failures, 0) >= 3, 'the upstream error, the rule refusal and the abort count as failures');
      for (const row of carol) assert.equal(row.amount, Math.round((((row.bytesUp + row.bytesDown) * PRICE) / 2 ** 30) * 1e6) / 1e6);
      assert.ok(
        r.body.filter((x) => x.user === 'dave').every((x) => x.amount === null),
        'no price: amount null',
      );
    }
    const res = await fetch(`${gw.adminUrl}/v1/usage?from=${from}&to=${to}&granularity=hour&format=csv`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/csv/);
    assert.equal(res.headers.get('x-rotor-currency'), 'EUR');
    const lines = (await res.text()).trim().split('\r\n');
    assert.match(
      res.headers.get('content-disposition') ?? '',
      /^attachment; filename="rotor-usage-\d{4}-\d{2}-\d{2}-\d{4}-\d{2}-\d{2}\.csv"$/,
    );
    assert.equal(lines[0], 'user,period,bytesUp,bytesDown,connections,failures,amount,currency');
    assert.ok(
      lines.slice(1).every((l) => l.endsWith(',EUR')),
      'the currency in every row',
    );
    const sums = new Map<string, number>();
    for (const line of lines.slice(1)) {
      const [user, , up, down] = line.split(',');
      sums.set(user!, (sums.get(user!) ?? 0) + Number(up) + Number(down));
    }
    assert.equal(sums.get('carol'), meters.carol);
    assert.equal(sums.get('dave'), meters.dave);
  });

  test("compare=platform: Rotor's bytes beside the platform's flow-use log per main account", async () => {
    const from = new Date(Date.now() - 86_400_000).toISOString();
    const to = new Date(Date.now() + 86_400_000).toISOString();
    const r = await gw.admin<
      { account: string; productNo: string; rotorBytes: number; platformBytes: number | null; differenceBytes: number | null }[]
    >(`/v1/usage?from=${from}&to=${to}&granularity=day&compare=platform`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const shop1 = r.body.filter((x) => x.account === 'shop1');
    assert.ok(shop1.length >= 1);
    const rotor = shop1.reduce((n, x) => n + x.rotorBytes, 0);
    assert.equal(rotor, (await usedBytes('carol')) + (await usedBytes('dave')));
    for (const row of shop1) {
      assert.equal(typeof row.platformBytes, 'number');
      assert.equal(row.differenceBytes, row.platformBytes! - row.rotorBytes);
    }
  });

  test('admin rules: 401 without the token, percent-encoded path, absolute-form target', async () => {
    for (const path of ['/v1/connections', '/v1/connections/active', '/v1/usage']) {
      const res = await fetch(`${gw.adminUrl}${path}`);
      assert.equal(res.status, 401, path);
    }
    const del = await fetch(`${gw.adminUrl}/v1/connections/abc`, { method: 'DELETE' });
    assert.equal(del.status, 401);
    const encoded = await rawRequest(gw.ports.admin, `GET /%76%31/connections?limit=1 HTTP/1.1\r\nAuthorization: Bearer ${TOKEN}`);
    assert.ok(encoded.status === 200 || encoded.status === 404, `answered ${encoded.status}`);
    const encodedNoToken = await rawRequest(gw.ports.admin, 'GET /%76%31/connections HTTP/1.1');
    assert.notEqual(encodedNoToken.status, 200, 'a percent-encoded path never skips the token check');
    const absolute = await rawRequest(gw.ports.admin, `GET http://x/v1/usage HTTP/1.1\r\nAuthorization: Bearer ${TOKEN}`);
    // 403: the Host/Origin policy refuses the authority `x` (not a loopback name) before any route runs.
    assert.ok([200, 400, 403, 404].includes(absolute.status), `answered ${absolute.status}`);
    const absoluteNoToken = await rawRequest(gw.ports.admin, 'GET http://x/v1/connections/active HTTP/1.1');
    assert.notEqual(absoluteNoToken.status, 200, 'an absolute-form target never skips the token check');
    const docs = (await (await fetch(`${gw.adminUrl}/docs/json`)).json()) as {
      paths: Record<string, Record<string, { operationId?: string }>>;
    };
    assert.equal(docs.paths['/v1/connections']?.get?.operationId, 'listConnections');
    assert.equal(docs.paths['/v1/connections/active']?.get?.operationId, 'listActiveConnections');
    assert.equal(docs.paths['/v1/connections/{id}']?.delete?.operationId, 'closeConnection');
    assert.equal(docs.paths['/v1/usage']?.get?.operationId, 'getUsage');
  });
});
