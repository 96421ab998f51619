// Request rules end to end over real sockets: three microsocks upstreams leave through distinct loopback
// addresses (-b 127.0.0.2/3/4), and the target answers 403 to the first exit. A user with "retry on 403, ban
// the exit 10 min" gets 200 through another exit, the banned exit is not used for that user until the ban
// ends (injected clock), and the connection record names the rule and the retries; a POST is retried only
// when its rule lists POST; a user without rules gets the 403 as it came; a tunnel's failed dial bans.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ConnectionLog } from '../../src/connlog/recorder.ts';
import type { ConnectionRecord, RecordSink } from '../../src/connlog/types.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';
import { HttpListener } from '../../src/proxy/http.ts';
import { BanTable } from '../../src/proxy/request-bans.ts';
import { RequestRules, type CompiledRule, type RequestRule } from '../../src/proxy/request-rules.ts';
import { Router } from '../../src/proxy/router.ts';
import { requestRulesSchema } from '../../src/users/request-rules-schema.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { freePort, waitForPort } from '../support/ports.ts';
import { stopChild } from '../support/upstreams.ts';
import { waitFor } from '../support/wait.ts';
import { deadPort, FixedPool, FixedPools, MapSessions, node, user, Users } from './fixtures.ts';

const EXITS = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];
const BANNED_BY_TARGET = '127.0.0.2';

interface Upstream {
  node: UpstreamNode;
  stop(): Promise<void>;
}

async function microsocksVia(bind: string, i: number): Promise<Upstream> {
  const port = await freePort();
  const child = spawn('microsocks', ['-i', '127.0.0.1', '-p', String(port), '-u', `u${i}`, '-P', `p${i}`, '-b', bind], { stdio: 'ignore' });
  await waitForPort(port);
  return { node: node('socks5', port, `u${i}`, `p${i}`), stop: () => stopChild(child) };
}

/** Answers 403 to one exit, else 200 with the exit's address; POST echoes its body's length too. */
async function startTarget(): Promise<{ port: number; seen: Map<string, number>; server: Server }> {
  const seen = new Map<string, number>();
  const server = createServer((req, res) => {
    const from = req.socket.remoteAddress ?? '';
    seen.set(from, (seen.get(from) ?? 0) + 1);
    let body = 0;
    req.on('data', (c: Buffer) => (body += c.length));
    req.on('end', () => {
      const path = req.url ?? '';
      if (path.startsWith('/cap')) {
        // A 200 with a captcha page to one exit; a big page whose "captcha" sits past the first 20 KiB to all.
        res.writeHead(200, { 'content-type': 'text/html' });
        if (path.startsWith('/cap-cut')) {
          // The upstream dies in the middle of the held bytes.
          res.write('partial body, no captcha yet');
          setImmediate(() => req.socket.destroy());
          return;
        }
        if (path.startsWith('/cap-big')) res.end(`${'x'.repeat(20_000)} please solve this captcha ${'y'.repeat(80_000)}`);
        else if (from === BANNED_BY_TARGET) res.end('<html><p>Please solve this CAPTCHA to continue</p></html>');
        else res.end(`${from} page`);
        return;
      }
      if (from === BANNED_BY_TARGET) {
        res.writeHead(403, { 'content-type': 'text/plain', 'x-blocked': 'by-target' });
        res.end('blocked');
        return;
      }
      res.end(`${from} ${req.method} ${body}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, seen, server };
}

function send(
  port: number,
  name: string,
  url: string,
  method = 'GET',
  body?: string,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method,
        path: url,
        agent: false,
        headers: {
          'proxy-authorization': `Basic ${Buffer.from(`${name}:pw`).toString('base64')}`,
          ...(body !== undefined ? { 'content-length': Buffer.byteLength(body) } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const rules = (list: unknown): RequestRule[] => requestRulesSchema.parse(list);

describe('request rules: retry through another exit, ban the exit, tag the record', () => {
  const clock = { t: 1_800_000_000_000 };
  const now = (): number => clock.t;
  let ups: Upstream[];
  let target: Awaited<ReturnType<typeof startTarget>>;
  let listener: HttpListener;
  let pool: FixedPool;
  let bans: BanTable;
  const records: ConnectionRecord[] = [];
  let log: ConnectionLog;

  before(async () => {
    ups = [];
    for (const [i, bind] of EXITS.entries()) ups.push(await microsocksVia(bind, i));
    target = await startTarget();
    pool = new FixedPool(ups.map((u) => u.node));
    bans = new BanTable({ now });
    const sink: RecordSink = {
      write: async (batch) => void records.push(...batch),
      close: async () => {},
    };
    log = new ConnectionLog({ sinks: [sink], flushIntervalMs: 20 });
    const router = new Router({
      users: new Users([
        user('alice', 'pw', { requestRules: rules([{ status: [403, 429], action: 'retry_ban', retries: 2, banSeconds: 600 }]) }),
        user('poster', 'pw', {
          requestRules: rules([{ name: 'post-403', status: [403], action: 'retry_ban', banSeconds: 600, methods: ['POST'] }]),
        }),
        user('tagger', 'pw', { requestRules: rules([{ name: 'watch', status: [403], action: 'tag' }]) }),
        user('plain', 'pw'),
        user('solver', 'pw', { requestRules: rules([{ name: 'captcha', body: 'solve (this|the) captcha', action: 'retry_ban' }]) }),
        user('tunnel', 'pw', { requestRules: rules([{ name: 'dial', status: [502], action: 'ban', banSeconds: 60 }]) }),
      ]),
      meters: new UnlimitedMeters(),
      pools: new FixedPools(pool),
      sessions: new MapSessions(),
      retries: 1,
      connectTimeoutMs: 2000,
      handshakeTimeoutMs: 2000,
      hedgeAfterMs: 10_000,
      dialDeadlineMs: 5000,
      requestRules: new RequestRules(),
      bans,
      now,
    });
    listener = new HttpListener({ router, port: 0, recorder: log });
    await listener.listen();
  });
  after(async () => {
    await listener.close();
    await log.close();
    for (const u of ups) await u.stop();
    await new Promise<void>((resolve) => target.server.close(() => resolve()));
  });

  async function recordOf(user: string, n: number): Promise<ConnectionRecord> {
    await waitFor(() => records.filter((r) => r.user === user).length >= n, 5000);
    return records.filter((r) => r.user === user)[n - 1]!;
  }

  test('403 from the first exit: 200 through another, the exit banned 10 min, the record shows rule and retry', async () => {
    pool.next = 0; // the first request is handed the exit the target refuses
    const r = await send(listener.port, 'alice', `http://127.0.0.1:${target.port}/a`);
    assert.equal(r.status, 200, r.body);
    assert.match(r.body, /^127\.0\.0\.3 GET 0$/);
    const list = bans.list();
    assert.equal(list.length, 1);
    assert.equal(list[0]!.user, 'alice');
    assert.equal(list[0]!.node, ups[0]!.node.id);
    assert.equal(list[0]!.until - clock.t, 600_000);
    assert.equal(list[0]!.host, null);
    const rec = await recordOf('alice', 1);
    assert.equal(rec.rule, 'user#0');
    assert.equal(rec.retries, 1);
    assert.equal(rec.result, 'ok');
    assert.equal(rec.node, ups[1]!.node.id);
  });

  test("the banned exit carries none of the user's requests until the ban ends, then again", async () => {
    const before = target.seen.get(BANNED_BY_TARGET) ?? 0;
    for (let i = 0; i < 6; i++) {
      const r = await send(listener.port, 'alice', `http://127.0.0.1:${target.port}/b${i}`);
      assert.equal(r.status, 200);
      assert.doesNotMatch(r.body, /127\.0\.0\.2/);
    }
    assert.equal(target.seen.get(BANNED_BY_TARGET) ?? 0, before, 'no request left through the banned exit');
    // Another user is not bound by alice's ban: it reaches the exit (and, without rules, gets its 403).
    pool.next = 0;
    const other = await send(listener.port, 'plain', `http://127.0.0.1:${target.port}/c`);
    assert.equal(other.status, 403);
    assert.equal(other.headers['x-blocked'], 'by-target', "the target's own answer, untouched");
    assert.equal(other.headers['proxy-status'], undefined);
    const plainRec = await recordOf('plain', 1);
    assert.equal(plainRec.rule, undefined);
    assert.equal(plainRec.retries, 0);
    // The ban ends: the exit is handed to alice again (and fires the rule again).
    clock.t += 600_001;
    assert.equal(bans.list().length, 0);
    const seenBefore = target.seen.get(BANNED_BY_TARGET) ?? 0;
    for (let i = 0; i < 3; i++) assert.equal((await send(listener.port, 'alice', `http://127.0.0.1:${target.port}/d${i}`)).status, 200);
    assert.equal(target.seen.get(BANNED_BY_TARGET), seenBefore + 1, 'after the ban the exit was used once, and banned again');
    assert.equal(bans.list().length, 1);
  });

  test('a POST is not retried unless its rule lists POST; with it the body goes again whole', async () => {
    for (const b of bans.list()) bans.lift(b.id);
    pool.next = 0;
    const r = await send(listener.port, 'alice', `http://127.0.0.1:${target.port}/post`, 'POST', 'x'.repeat(1000));
    assert.equal(r.status, 403, "alice's rule retries idempotent methods only");
    // Its record: the rule fired (tagged, banned) with no retry.
    await waitFor(
      () => records.some((x) => x.user === 'alice' && x.target?.endsWith(`:${target.port}`) && x.rule === 'user#0' && x.retries === 0),
      5000,
      'the POST record',
    );
    assert.equal(bans.list().filter((b) => b.user === 'alice').length, 1, 'the ban applies even when the method is not retried');

    pool.next = 0;
    const p = await send(listener.port, 'poster', `http://127.0.0.1:${target.port}/post`, 'POST', 'y'.repeat(5000));
    assert.equal(p.status, 200, p.body);
    assert.match(p.body, /POST 5000$/);
    const prec = await recordOf('poster', 1);
    assert.equal(prec.rule, 'post-403');
    assert.equal(prec.retries, 1);
  });

  test('action tag: the answer passes through, the record names the rule, nothing is banned', async () => {
    pool.next = 0;
    const before = bans.list().length;
    const r = await send(listener.port, 'tagger', `http://127.0.0.1:${target.port}/t`);
    assert.equal(r.status, 403);
    const rec = await recordOf('tagger', 1);
    assert.equal(rec.rule, 'watch');
    assert.equal(rec.retries, 0);
    assert.equal(bans.list().length, before);
  });

  test('a 200 whose body shows a captcha: retried through another exit before any byte reached the client, banned, recorded', async () => {
    pool.next = 0;
    const r = await send(listener.port, 'solver', `http://127.0.0.1:${target.port}/cap1`);
    assert.equal(r.status, 200);
    assert.equal(r.body, '127.0.0.3 page', 'the captcha page never reached the client');
    const mine = bans.list().filter((b) => b.user === 'solver');
    assert.equal(mine.length, 1);
    assert.equal(mine[0]!.node, ups[0]!.node.id);
    assert.equal(mine[0]!.rule, 'captcha');
    const rec = await recordOf('solver', 1);
    assert.equal(rec.rule, 'captcha');
    assert.equal(rec.retries, 1);
    assert.equal(rec.node, ups[1]!.node.id);
    // The banned exit is not used again: every later page comes from the others.
    for (let i = 0; i < 3; i++)
      assert.match((await send(listener.port, 'solver', `http://127.0.0.1:${target.port}/cap${i}`)).body, /page$/);
  });

  test('the body pattern sees the first bodyBytes only: a page whose match lies further passes whole', async () => {
    const r = await send(listener.port, 'solver', `http://127.0.0.1:${target.port}/cap-big`);
    assert.equal(r.status, 200);
    assert.equal(r.body.length, 20_000 + ' please solve this captcha '.length + 80_000, 'the held bytes and the rest arrive, in order');
    assert.match(r.body, /^x{20000} please solve this captcha y{80000}$/);
    const rec = await recordOf('solver', 5);
    assert.equal(rec.rule, undefined);
    assert.equal(rec.retries, 0);
  });

  test('the upstream closing while the body is held: a 502 with Proxy-Status, none of the held bytes', async () => {
    const r = await send(listener.port, 'solver', `http://127.0.0.1:${target.port}/cap-cut`);
    assert.equal(r.status, 502);
    assert.match(String(r.headers['proxy-status']), /^rotor; error=/);
    assert.doesNotMatch(r.body, /partial body/);
    // A HEAD (no body at all) passes at once.
    const h = await send(listener.port, 'solver', `http://127.0.0.1:${target.port}/cap-head`, 'HEAD');
    assert.equal(h.status, 200);
  });

  test('a tunnel whose dial fails (502) bans the exits that failed for that user', async () => {
    const dead = await deadPort();
    const deadNode = node('socks5', dead, 'x', 'y');
    const saved = pool.nodes;
    pool.nodes = [deadNode];
    pool.next = 0;
    try {
      const got = await new Promise<number>((resolve, reject) => {
        const req = httpRequest({
          host: '127.0.0.1',
          port: listener.port,
          method: 'CONNECT',
          path: `127.0.0.1:${target.port}`,
          agent: false,
          headers: { 'proxy-authorization': `Basic ${Buffer.from('tunnel:pw').toString('base64')}` },
        });
        req.on('connect', (res, socket) => {
          socket.destroy();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
      assert.equal(got, 502);
      const mine = bans.list().filter((b) => b.user === 'tunnel');
      assert.equal(mine.length, 1);
      assert.equal(mine[0]!.node, deadNode.id);
      assert.equal(mine[0]!.rule, 'dial');
      assert.equal(mine[0]!.until - clock.t, 60_000);
    } finally {
      pool.nodes = saved;
    }
  });
});

describe('request rules: compiled once, nothing on the path without rules', () => {
  test('no rule anywhere: forRequest answers undefined; host patterns and methods', () => {
    const none = new RequestRules();
    assert.equal(none.forRequest({}, 'example.com'), undefined);
    const set = new RequestRules(rules([{ hosts: ['*.shop.example', 'api.example'], status: [429], action: 'retry' }]));
    assert.equal(set.forRequest({}, 'other.example'), undefined);
    assert.ok(set.forRequest({}, 'www.shop.example'));
    assert.equal(set.forRequest({}, 'shop.example'), undefined, '*.name is strict subdomains');
    const hit = set.forRequest({}, 'API.example')!;
    const rule = hit.atHead(429, []) as CompiledRule;
    assert.equal(rule.name, 'proxy#0');
    assert.equal(rule.mayRetry('GET'), true);
    assert.equal(rule.mayRetry('POST'), false);
    assert.equal(hit.atHead(403, []), undefined);
  });

  test('body patterns: invalid or costly ones are refused naming the key; accepted ones compile once', () => {
    const refused = (rule: unknown): string => {
      const r = requestRulesSchema.safeParse([rule]);
      assert.equal(r.success, false, JSON.stringify(rule));
      const issue = r.error!.issues.find((i) => i.path.join('.') === '0.body');
      assert.ok(issue, `an issue on 0.body: ${JSON.stringify(r.error!.issues)}`);
      return issue.message;
    };
    assert.match(refused({ body: 'captcha(', action: 'tag' }), /not a valid regular expression/);
    assert.match(refused({ body: '(a+)+$', action: 'tag' }), /unbounded repetition/);
    assert.match(refused({ body: '.*x', action: 'tag' }), /unbounded repetition/);
    assert.match(refused({ body: 'a{2,}', action: 'tag' }), /unbounded repetition/);
    assert.match(refused({ body: '(a)\\1', action: 'tag' }), /backreference/);
    assert.match(refused({ body: 'x(?=y)', action: 'tag' }), /lookaround/);
    assert.match(refused({ body: '(.{0,20}){0,20}', action: 'tag' }), /too costly/);
    assert.match(refused({ body: '.{0,200}a.{0,200}b', action: 'tag' }), /too costly/);
    // The same pattern over fewer bytes is within the budget.
    assert.ok(requestRulesSchema.safeParse([{ body: '.{0,200}a.{0,200}b', bodyBytes: 100, action: 'tag' }]).success);
    assert.equal(requestRulesSchema.safeParse([{ body: 'x', bodyBytes: 65537, action: 'tag' }]).success, false);
    const ok = rules([{ body: 'captcha|are you (a )?robot|access.{0,40}denied', status: [200, 403], action: 'tag' }]);
    assert.equal(ok[0]!.bodyBytes, 8192);
    const set = new RequestRules(ok).forRequest({}, 'example.com')!;
    assert.equal(set.atHead(200, []), 8192, 'a possible body match: hold 8 KiB');
    assert.equal(set.atHead(404, []), undefined, 'status not listed: nothing held');
    assert.equal(set.afterBody(200, [], Buffer.from('<h1>Access is Denied</h1>'))?.name, 'proxy#0');
    assert.equal(set.afterBody(200, [], Buffer.from('welcome')), undefined);
  });

  test('the schema refuses a rule without status or timeoutMs, and bad methods', () => {
    assert.throws(() => requestRulesSchema.parse([{ action: 'retry' }]));
    assert.throws(() => requestRulesSchema.parse([{ status: [403], action: 'retry', methods: ['get'] }]));
    assert.throws(() => requestRulesSchema.parse([{ status: [403], action: 'explode' }]));
  });
});
