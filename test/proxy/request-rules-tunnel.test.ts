// Request rules on tunnels (CONNECT and SOCKS5) over real sockets: two microsocks exits leave through distinct
// loopback addresses (-b 127.0.0.2/3) and the target never answers connections from the first. A user whose
// rule is "no first byte within timeoutMs: ban the exit" gets that exit banned once its client has spoken and
// the upstream stayed silent; the next tunnel leaves through the other exit; the record names the rule. A
// client that has not sent anything is not judged (the upstream's silence is then not a fault).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { SocksClient } from 'socks';
import { ConnectionLog } from '../../src/connlog/recorder.ts';
import type { ConnectionRecord, RecordSink } from '../../src/connlog/types.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';
import { HttpListener } from '../../src/proxy/http.ts';
import { BanTable } from '../../src/proxy/request-bans.ts';
import { RequestRules } from '../../src/proxy/request-rules.ts';
import { Router } from '../../src/proxy/router.ts';
import { Socks5Listener } from '../../src/proxy/socks5.ts';
import { requestRulesSchema } from '../../src/users/request-rules-schema.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { freePort, waitForPort } from '../support/ports.ts';
import { stopChild } from '../support/upstreams.ts';
import { waitFor } from '../support/wait.ts';
import { deadPort, FixedPool, FixedPools, MapSessions, node, user, Users } from './fixtures.ts';

const SILENT_TO = '127.0.0.2';
const TIMEOUT_MS = 600;

async function microsocksVia(bind: string, i: number): Promise<{ node: UpstreamNode; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn('microsocks', ['-i', '127.0.0.1', '-p', String(port), '-u', `t${i}`, '-P', `p${i}`, '-b', bind], { stdio: 'ignore' });
  await waitForPort(port);
  return { node: node('socks5', port, `t${i}`, `p${i}`), stop: () => stopChild(child) };
}

/** Echoes each line back prefixed with the peer's address; says nothing at all to one exit. */
async function startLineTarget(): Promise<{ port: number; server: Server; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    if (s.remoteAddress === SILENT_TO) return;
    s.on('data', (d: Buffer) => s.write(`${s.remoteAddress} ${d.toString('utf8')}`));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, server, sockets };
}

function connectTunnel(port: number, name: string, target: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      method: 'CONNECT',
      path: target,
      agent: false,
      headers: { 'proxy-authorization': `Basic ${Buffer.from(`${name}:pw`).toString('base64')}` },
    });
    req.on('connect', (res, socket) => (res.statusCode === 200 ? resolve(socket) : reject(new Error(`CONNECT ${res.statusCode}`))));
    req.on('error', reject);
    req.end();
  });
}

async function socksTunnel(port: number, name: string, targetPort: number): Promise<Socket> {
  const { socket } = await SocksClient.createConnection({
    proxy: { host: '127.0.0.1', port, type: 5, userId: name, password: 'pw' },
    command: 'connect',
    destination: { host: '127.0.0.1', port: targetPort },
    timeout: 10_000,
  });
  return socket;
}

function firstData(s: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    s.once('data', (d: Buffer) => resolve(d.toString('utf8')));
    s.once('error', reject);
  });
}

function closed(s: Socket): Promise<void> {
  return new Promise((resolve) => {
    if (s.destroyed) resolve();
    else s.once('close', () => resolve());
    s.destroy();
  });
}

describe('request rules on tunnels: time to first byte on CONNECT and SOCKS5', () => {
  let ups: Array<{ node: UpstreamNode; stop(): Promise<void> }>;
  let target: Awaited<ReturnType<typeof startLineTarget>>;
  let pool: FixedPool;
  let bans: BanTable;
  let http: HttpListener;
  let socks: Socks5Listener;
  let log: ConnectionLog;
  const records: ConnectionRecord[] = [];

  before(async () => {
    ups = [await microsocksVia(SILENT_TO, 0), await microsocksVia('127.0.0.3', 1)];
    target = await startLineTarget();
    pool = new FixedPool(ups.map((u) => u.node));
    bans = new BanTable();
    const sink: RecordSink = { write: async (batch) => void records.push(...batch), close: async () => {} };
    log = new ConnectionLog({ sinks: [sink], flushIntervalMs: 20 });
    const router = new Router({
      users: new Users([
        user('dialer', 'pw', {
          requestRules: requestRulesSchema.parse([
            { name: 'elsewhere', hosts: ['other.example'], status: [502], action: 'ban' },
            { name: 'dial', hosts: ['127.0.0.1'], status: [502, 504], action: 'ban', banSeconds: 30 },
          ]),
        }),
        user('slow', 'pw', {
          requestRules: requestRulesSchema.parse([{ name: 'ttfb', timeoutMs: TIMEOUT_MS, action: 'ban', banSeconds: 60 }]),
        }),
      ]),
      meters: new UnlimitedMeters(),
      pools: new FixedPools(pool),
      sessions: new MapSessions(),
      retries: 1,
      connectTimeoutMs: 5000,
      handshakeTimeoutMs: 5000,
      hedgeAfterMs: 10_000,
      dialDeadlineMs: 10_000,
      requestRules: new RequestRules(),
      bans,
    });
    http = new HttpListener({ router, port: 0, recorder: log });
    await http.listen();
    socks = new Socks5Listener({ router, port: 0, recorder: log });
    await socks.listen();
  });
  after(async () => {
    await http.close();
    await socks.close();
    await log.close();
    for (const u of ups) await u.stop();
    for (const s of target.sockets) s.destroy();
    await new Promise<void>((resolve) => target.server.close(() => resolve()));
  });

  const liftAll = (): void => {
    for (const b of bans.list()) bans.lift(b.id);
  };

  const cases: Array<{ name: string; open: () => Promise<Socket> }> = [
    { name: 'CONNECT', open: () => connectTunnel(http.port, 'slow', `127.0.0.1:${target.port}`) },
    { name: 'SOCKS5', open: () => socksTunnel(socks.port, 'slow', target.port) },
  ];
  for (const c of cases) {
    test(`${c.name}: no first byte within timeoutMs after the client spoke: the exit is banned, the next tunnel leaves elsewhere`, async () => {
      liftAll();
      pool.next = 0;
      const count = records.length;
      const t = await c.open();
      t.write('hello\n');
      await waitFor(() => bans.list().length === 1, 10_000, 'the ban');
      const ban = bans.list()[0]!;
      assert.equal(ban.user, 'slow');
      assert.equal(ban.node, ups[0]!.node.id);
      assert.equal(ban.rule, 'ttfb');
      assert.equal(ban.until - ban.createdAt, 60_000);
      await closed(t);
      await waitFor(() => records.length > count, 5000, 'the record');
      const rec = records[records.length - 1]!;
      assert.equal(rec.rule, 'ttfb');
      assert.equal(rec.node, ups[0]!.node.id);

      // The banned exit is skipped even though the pool hands it out first.
      pool.next = 0;
      const u = await c.open();
      const got = firstData(u);
      u.write('again\n');
      assert.equal(await got, '127.0.0.3 again\n');
      await closed(u);
      await waitFor(() => records.length > count + 1, 5000, 'the second record');
      assert.equal(records[records.length - 1]!.node, ups[1]!.node.id);
    });
  }

  test('SOCKS5: a failed dial (502) fires the first rule whose hosts match and bans the exits that failed', async () => {
    liftAll();
    const dead = node('socks5', await deadPort(), 'x', 'y');
    const saved = pool.nodes;
    pool.nodes = [dead];
    pool.next = 0;
    try {
      await assert.rejects(socksTunnel(socks.port, 'dialer', target.port));
      const list = bans.list();
      assert.equal(list.length, 1);
      assert.equal(list[0]!.node, dead.id);
      assert.equal(list[0]!.rule, 'dial', 'the rule for other.example does not apply to 127.0.0.1');
      assert.equal(list[0]!.until - list[0]!.createdAt, 30_000);
    } finally {
      pool.nodes = saved;
    }
  });

  test('a client that has not spoken is not judged; once it speaks, the silent upstream is', async () => {
    liftAll();
    pool.next = 0;
    const t = await cases[0]!.open();
    // Three rule periods of client silence: the upstream owes nothing yet. (An absence needs a wait.)
    await new Promise((resolve) => setTimeout(resolve, 3 * TIMEOUT_MS));
    assert.equal(bans.list().length, 0, 'no ban while the client said nothing');
    const spoke = Date.now();
    t.write('late\n');
    await waitFor(() => bans.list().length === 1, 10_000, 'the ban after the client spoke');
    assert.ok(Date.now() - spoke >= TIMEOUT_MS - 50, `judged ${Date.now() - spoke} ms after the client spoke, not before timeoutMs`);
    await closed(t);
  });
});
