// A config user removed from the file, or set `enabled: false` there, and the config reloaded (SIGHUP's path):
// its open connections end, as DELETE /v1/users/:name and PATCH {enabled: false} end them (review13 #4: the
// reload deleted or disabled the user but left its tunnels moving the reseller's traffic, with no quota and no
// user to bill). Real daemon on the embedded sandbox, a real SOCKS5 download paced at 1 MiB/s per user.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { startGateway, testConfig, type Gateway } from '../e2e/harness.ts';
import { startTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import { poll } from '../support/wait.ts';

const MiB = 1024 * 1024;
const user = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  password: `${name}-pass`,
  mainAccount: 'shop1',
  product: '',
  limitBytes: -1,
  ...extra,
});

let gw: Gateway;
let target: BytesTarget;
before(async () => {
  target = await startTarget();
  gw = await startGateway({ config: { users: [user('alice'), user('ann'), user('dan'), user('kim')] } });
});
after(async () => {
  await gw?.close();
  await target?.close();
});

/** A SOCKS5 tunnel through `name` reading a long download paced at 1 MiB/s; what it received, whether it closed. */
async function download(name: string): Promise<{ received: () => number; closed: () => boolean; socket: Socket }> {
  let received = 0;
  let closed = false;
  const s = connect({ host: '127.0.0.1', port: gw.ports.socks5 });
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.once('connect', () =>
      socks5Connect(s, { host: '127.0.0.1', port: target.port }, { username: name, password: `${name}-pass` }, (err) => {
        if (err) return reject(err);
        s.on('data', (c: Buffer) => (received += c.length));
        s.resume();
        s.write(`GET /bytes/${512 * MiB}?rate=${MiB} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
        resolve();
      }),
    );
  });
  s.on('error', () => undefined);
  s.on('close', () => (closed = true));
  return { received: () => received, closed: () => closed, socket: s };
}

test('a reload that removes a config user or sets enabled: false ends its open connections; the others keep theirs', async () => {
  const ann = await download('ann');
  const dan = await download('dan');
  const kim = await download('kim');
  try {
    await poll(async () => (ann.received() > 100_000 && dan.received() > 100_000 && kim.received() > 100_000 ? true : undefined), {
      what: 'the three downloads running',
      timeoutMs: 15_000,
    });
    await gw.daemon.reload(testConfig({ ...gw.config, users: [user('alice'), user('dan', { enabled: false }), user('kim')] } as never));
    await poll(async () => (ann.closed() ? true : undefined), {
      what: `ann's tunnel ended after its removal (${ann.received()} B received)`,
      timeoutMs: 10_000,
    });
    await poll(async () => (dan.closed() ? true : undefined), {
      what: `dan's tunnel ended after enabled: false (${dan.received()} B received)`,
      timeoutMs: 10_000,
    });
    // A user the reload left as it was keeps its tunnel.
    const before = kim.received();
    await poll(async () => (kim.received() > before + 100_000 ? true : undefined), { what: "kim's download going on", timeoutMs: 10_000 });
    assert.equal(kim.closed(), false);
    assert.equal((await gw.admin('/v1/users/ann')).status, 404);
  } finally {
    for (const d of [ann, dan, kim]) d.socket.destroy();
  }
});
