// What a connection record says about where a connection came from and where it left: `exit` only when the
// upstream told it (a SOCKS5 upstream's reply names the address it connected from; an HTTP upstream says
// nothing, and the address Rotor dialed is an entry gateway, not an exit), `listener` naming a user's own
// port as such, and `client`, the client's source address, for abuse reports: in the store (GET
// /v1/connections), the live list and the JSON-lines file, and left out everywhere with
// `log.access.clients: false` (as `targets: false` leaves out targets).
// The real daemon on the embedded sandbox, curl bound to chosen loopback source addresses.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { curl, startGateway, startTarget, viaConnect, viaHttp, viaSocks5h, type Gateway, type Target } from '../e2e/harness.ts';
import { startTarget as startBytesTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { waitFor } from '../support/wait.ts';
import { ConnectionLog, ConnectionLogService, JsonLinesFileSink } from '../../src/connlog/index.ts';
import { SqliteStore } from '../../src/store/index.ts';
import type { ConnectionRecord } from '../../src/connlog/types.ts';

const TOKEN = 'record-fields-token-5d1e';
const ERIN = { name: 'erin', password: 'erin-pw', mainAccount: 'shop1', listen: { port: 0, allowIps: ['127.0.0.0/8'] } };

describe('connection records: exit when known, user ports named, the client address', () => {
  let gw: Gateway;
  let target: Target;
  let bytes: BytesTarget;
  let dir: string;
  let file: string;

  const records = async (query: string): Promise<ConnectionRecord[]> => {
    await gw.daemon.connections.recorder.flush();
    const r = await gw.admin<{ items: ConnectionRecord[] }>(`/v1/connections?${query}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.items;
  };
  const fileRecords = (): ConnectionRecord[] =>
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as ConnectionRecord);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rotor-record-fields-'));
    file = join(dir, 'connections.jsonl');
    target = await startTarget();
    bytes = await startBytesTarget();
    gw = await startGateway({
      config: {
        admin: { token: TOKEN },
        log: { access: { file } },
        users: [{ name: 'carol', password: 'carol-pw', mainAccount: 'shop1' }, ERIN],
      },
    });
  });
  after(async () => {
    await gw?.close();
    await target?.close();
    await bytes?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('SOCKS5 upstream: exit is the address the target saw; client is the source address; shared listener named', async () => {
    const r = await curl(['--interface', '127.0.0.77', ...viaSocks5h(gw.ports.socks5, 'carol', 'carol-pw'), target.url()]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.ok(gw.exits.includes(r.body), `left through an exit: ${r.body}`);
    const [rec] = await waitFor(
      async () => {
        const list = await records('user=carol&result=ok');
        return list.length >= 1 ? list : undefined;
      },
      15_000,
      'the record',
    );
    assert.ok(rec!.node?.startsWith('socks5://'), `a SOCKS5 node: ${rec!.node}`);
    assert.equal(rec!.exit, r.body, 'the exit the upstream named in its reply, which the target saw');
    assert.notEqual(rec!.exit, '127.0.0.1');
    assert.equal(rec!.client, '127.0.0.77');
    assert.equal(rec!.listener, 'socks5');
    const inFile = await waitFor(() => fileRecords().find((x) => x.id === rec!.id), 15_000, 'the record in the file');
    assert.equal(inFile.client, '127.0.0.77');
    assert.equal(inFile.exit, r.body);
  });

  test("a user's own port: records say user-port-http / user-port-socks5, with the client address", async () => {
    const port = gw.daemon.userPorts.portOf('erin')!;
    assert.ok(port > 0);
    for (const args of [
      ['-x', `http://127.0.0.1:${port}`],
      ['-p', '-x', `http://127.0.0.1:${port}`],
      ['-x', `socks5h://127.0.0.1:${port}`],
    ]) {
      const r = await curl(['--interface', '127.0.0.78', ...args, target.url()]);
      assert.equal(r.exitCode, 0, `${args.join(' ')}: ${r.stderr}`);
    }
    const got = await waitFor(
      async () => {
        const list = await records('user=erin&result=ok');
        return list.length >= 3 ? list : undefined;
      },
      15_000,
      'three records of erin',
    );
    assert.deepEqual(got.map((x) => x.listener).sort(), ['user-port-http', 'user-port-http', 'user-port-socks5']);
    for (const x of got) assert.equal(x.client, '127.0.0.78');
    // The shared listeners keep their names for the same user.
    const shared = await curl([...viaConnect(gw.ports.http, 'erin', 'erin-pw'), target.url()]);
    assert.equal(shared.exitCode, 0, shared.stderr);
    const plain = await curl([...viaHttp(gw.ports.http, 'erin', 'erin-pw'), target.url()]);
    assert.equal(plain.exitCode, 0, plain.stderr);
    const all = await waitFor(
      async () => {
        const list = await records('user=erin&result=ok');
        return list.length >= 5 ? list : undefined;
      },
      15_000,
      'five records of erin',
    );
    assert.equal(all.filter((x) => x.listener === 'http').length, 2);
    for (const x of all.filter((y) => y.listener === 'http')) assert.equal(x.client, '127.0.0.1');
  });

  test('the live list carries the client address too', async () => {
    const slow = curl([
      '--interface',
      '127.0.0.79',
      '--limit-rate',
      '20K',
      ...viaSocks5h(gw.ports.socks5, 'carol', 'carol-pw'),
      bytes.url(5_000_000),
    ]);
    const live = await waitFor(
      async () => {
        const r = await gw.admin<Array<{ id: string; client?: string }>>('/v1/connections/active');
        return r.body.find((c) => c.client === '127.0.0.79');
      },
      15_000,
      'a live connection from 127.0.0.79',
    );
    assert.ok(live.id);
    await gw.admin(`/v1/connections/${live.id}`, { method: 'DELETE' });
    await slow;
  });

  test('an HTTP upstream names no exit: the record has none (never the address Rotor dialed)', async () => {
    const opened = await gw.admin<{ appOrderNo: string }>('/v1/orders/open', {
      body: { productNo: 'STC-102-CHN-SHARED', count: 1, cycleTimes: 1, projectId: 'tiktok' },
    });
    assert.equal(opened.status, 202, JSON.stringify(opened.body));
    const order = await waitFor(
      async () => {
        const r = await gw.admin<{ status: number; instances?: Array<{ instanceNo: string; status: number | null }> }>(
          `/v1/orders/${opened.body.appOrderNo}`,
        );
        return r.body.status === 3 && r.body.instances?.[0]?.status === 3 ? r.body : undefined;
      },
      20_000,
      'the static order with its instance',
    );
    const user = `carol-instance-${order.instances![0]!.instanceNo}`;
    await waitFor(
      async () => {
        const r = await curl([...viaConnect(gw.ports.http, user, 'carol-pw'), target.url('/i')]);
        return r.status === 200 ? r : undefined;
      },
      20_000,
      'the gateway to route the instance',
      250,
    );
    const rec = await waitFor(
      async () => (await records('user=carol&result=ok')).find((x) => x.node?.startsWith('http://')),
      15_000,
      'the instance record',
    );
    assert.equal('exit' in rec, false, `no exit: ${JSON.stringify(rec)}`);
    const inFile = await waitFor(() => fileRecords().find((x) => x.id === rec.id), 15_000, 'in the file');
    assert.equal('exit' in inFile, false);
  });
});

describe('log.access.clients false: no client address in the store, the file, the live list or the API', () => {
  test('recorded without, and answered without even when stored with one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotor-record-clients-'));
    const store = new SqliteStore(':memory:');
    try {
      const log = store.connectionLog();
      const file = join(dir, 'c.jsonl');
      const sink = new JsonLinesFileSink({ file, maxSize: '10M', rotate: 2 });
      const recorder = new ConnectionLog({ store: log, sinks: [sink], clients: false, flushIntervalMs: 60_000 });
      const service = new ConnectionLogService({
        recorder,
        store: log,
        targets: true,
        clients: false,
        retention: { retentionDays: 7, maxRecords: 1000, usageRetentionDays: 30 },
        priceOf: () => null,
        accountOf: () => undefined,
      });
      const conn = recorder.open('socks5', '127.0.0.91');
      conn.user = 'u';
      assert.equal(
        service.active().some((c) => 'client' in c),
        false,
        'the live list has no client',
      );
      conn.end({ result: 'ok', reason: 'closed', up: 1, down: 2 });
      await recorder.flush();
      // A record stored while clients were on is answered without its address once they are off.
      await log.append([{ ...(await log.query({ limit: 1 }))[0]!, id: 'older', client: '127.0.0.92' }]);
      const listed = await service.list({ limit: 10 });
      assert.equal(listed.items.length, 2);
      for (const r of listed.items) assert.equal('client' in r, false, JSON.stringify(r));
      assert.equal((await log.query({ limit: 10 })).find((r) => r.id !== 'older')!.client, undefined, 'not stored');
      await service.close();
      assert.equal(readFileSync(file, 'utf8').includes('127.0.0.91'), false, 'not in the file');
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
