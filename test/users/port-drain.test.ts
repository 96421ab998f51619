// A stop drains open connections for proxy.drainMs and records those it then cuts as `shutdown` (README "What a
// stop or a crash costs the bill"); the users' own ports are no exception. Their connections are the shared
// listeners' once handed over, so at the stop a user port only stops accepting and closes the sockets no listener
// has taken yet (no first byte), as the shared listeners close their silent ones; the downloads on it, plain or
// inside TLS (`listen.tls`), get the drain and a `shutdown` record. Before this, 'user ports' stopped first and
// UserPorts.close destroyed every socket of the port at once: the user's download was cut at the stop's start,
// recorded `ok`/`closed` as if its client had ended it. Real daemon on the embedded sandbox, real SOCKS5 clients,
// the connection log's JSON-lines file read after the stop.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway } from '../e2e/harness.ts';
import { startTarget } from '../e2e/limits-harness.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import { makeCa } from '../support/tls.ts';
import { waitFor } from '../support/wait.ts';

const dir = mkdtempSync(join(tmpdir(), 'rotor-port-drain-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const MIB = 1024 * 1024;
const DRAIN_MS = 3_000;

interface Download {
  received: () => number;
  closedAt: Promise<number>;
}

/** A SOCKS5 download paced at 1 MiB/s through `port` (inside TLS with `ca`), its close time taken. */
function download(
  port: number,
  targetPort: number,
  options: { creds?: { username: string; password: string }; ca?: string } = {},
): Promise<Download> {
  return new Promise((resolve, reject) => {
    const s: Socket =
      options.ca === undefined
        ? connect({ host: '127.0.0.1', port })
        : tlsConnect({ host: '127.0.0.1', port, ca: options.ca, servername: 'localhost' });
    let received = 0;
    const closedAt = new Promise<number>((r) => s.once('close', () => r(Date.now())));
    s.once('error', reject);
    s.once(options.ca === undefined ? 'connect' : 'secureConnect', () =>
      socks5Connect(s, { host: '127.0.0.1', port: targetPort }, options.creds, (err) => {
        if (err) return reject(err);
        s.on('error', () => undefined);
        s.on('data', (c: Buffer) => (received += c.length));
        s.resume();
        s.write(`GET /bytes/${512 * MIB}?rate=${MIB} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
        resolve({ received: () => received, closedAt });
      }),
    );
  });
}

test("a stop drains the users' own ports (plain and TLS) as it drains the shared ones, and records their cut as `shutdown`", async () => {
  const target = await startTarget();
  const ca = await makeCa('Rotor Drain CA');
  const leaf = await ca.leaf('proxy');
  const file = join(dir, 'connections.jsonl');
  const gw = await startGateway({
    config: {
      proxy: { https: { host: '127.0.0.1', port: 0, cert: leaf.certFile, key: leaf.keyFile } },
      users: [
        { name: 'dedi', password: 'dedi-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: ['127.0.0.1/32'] } },
        { name: 'tessa', password: 'tessa-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: ['127.0.0.1/32'], tls: true } },
      ],
      log: { access: { file } },
    },
  });
  try {
    const port = gw.daemon.userPorts.portOf('dedi')!;
    const own = await download(port, target.port);
    const ownTls = await download(gw.daemon.userPorts.portOf('tessa')!, target.port, { ca: ca.certPem() });
    const shared = await download(gw.ports.socks5, target.port, { creds: { username: 'dedi', password: 'dedi-pass' } });
    // A client of the user's port that has sent nothing yet: no listener holds it, the stop closes it at once.
    const silent = connect({ host: '127.0.0.1', port });
    silent.on('error', () => undefined);
    const silentCut = new Promise<number>((r) => silent.once('close', () => r(Date.now())));
    await new Promise<void>((r) => silent.once('connect', () => r()));
    await waitFor(
      () => own.received() > 256 * 1024 && ownTls.received() > 256 * 1024 && shared.received() > 256 * 1024,
      20_000,
      'the three downloads under way',
    );
    const stopAt = Date.now();
    const closing = gw.close(DRAIN_MS);
    const [ownCut, tlsCut, sharedCut, silentAt] = await Promise.all([own.closedAt, ownTls.closedAt, shared.closedAt, silentCut]);
    await closing;
    const records = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { listener: string; result: string; reason: string; user: string; bytesDown: number });
    const ownRecord = records.find((r) => r.listener === 'user-port-socks5' && r.user === 'dedi');
    const tlsRecord = records.find((r) => r.listener === 'user-port-socks5' && r.user === 'tessa');
    const sharedRecord = records.find((r) => r.listener === 'socks5');
    const said = (cut: number, r: typeof ownRecord) => `${cut - stopAt} ms (${r?.result}/${r?.reason})`;
    const story =
      `drain ${DRAIN_MS} ms: the shared port's download was cut after ${said(sharedCut, sharedRecord)}, ` +
      `the user's own port's after ${said(ownCut, ownRecord)}, its TLS port's after ${said(tlsCut, tlsRecord)}`;
    for (const cut of [sharedCut, ownCut, tlsCut]) assert.ok(cut - stopAt >= DRAIN_MS - 500, story);
    for (const r of [sharedRecord, ownRecord, tlsRecord]) {
      assert.equal(r?.result, 'shutdown', story);
      assert.ok(r.bytesDown > 256 * 1024, `${story}: ${JSON.stringify(r)}`);
    }
    assert.ok(
      silentAt < Math.min(ownCut, tlsCut, sharedCut),
      `the silent client of the user port was closed after ${silentAt - stopAt} ms, ${story}`,
    );
  } finally {
    await target.close();
    ca.cleanup();
  }
});
