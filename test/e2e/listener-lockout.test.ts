// Strangers holding silent connections cannot lock operators, the platform or customers out of the daemon's HTTP
// listeners: at a cap (an address's or the listener's total) the oldest connection without a request in flight makes
// room for the newcomer. Before, the newcomer was refused: two addresses of 512 silent sockets closed the admin API to
// an operator with the right token, one address of 256 the callbacks, 32 addresses of 32 the portal.
// Real daemon, real sockets from several loopback addresses.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { startGateway, type Gateway } from './harness.ts';

let gw: Gateway;
const opened: Socket[] = [];
const TOKEN = 'lockout-token-123456';

before(async () => {
  gw = await startGateway({ config: { admin: { token: TOKEN }, portal: { host: '127.0.0.1', port: 0 } } });
});
after(async () => {
  for (const s of opened) s.destroy();
  await gw?.close();
});

function silent(port: number, localAddress: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress });
    opened.push(socket);
    socket.on('error', () => undefined);
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
}

/** One HTTP GET from 127.0.0.1: the status, or 'refused' when the daemon closes the connection unanswered. */
function get(port: number, path: string, headers: Record<string, string> = {}): Promise<number | 'refused'> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.1' });
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (d) => (data += d));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const m = /^HTTP\/1\.1 (\d+)/.exec(data);
      resolve(m ? Number(m[1]) : 'refused');
    });
    socket.once('connect', () => {
      const h = Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${h}\r\n`);
    });
  });
}

test('admin API: with 1,024 silent connections from two other addresses the operator with the token is served', async () => {
  const port = gw.ports.admin;
  const before = await get(port, '/v1/users', { authorization: `Bearer ${TOKEN}` });
  assert.equal(before, 200, 'the operator is served before');
  for (const addr of ['127.0.0.2', '127.0.0.3']) {
    for (let i = 0; i < 512; i += 64) await Promise.all(Array.from({ length: 64 }, () => silent(port, addr)));
  }
  const during = await get(port, '/v1/users', { authorization: `Bearer ${TOKEN}` });
  assert.equal(during, 200, `the operator (127.0.0.1, right token) is still served while strangers hold silent sockets: got ${during}`);
});

test('callbacks: with 256 silent connections from one address the platform is answered', async () => {
  const port = gw.ports.callback;
  for (let i = 0; i < 256; i += 64) await Promise.all(Array.from({ length: 64 }, () => silent(port, '127.0.0.9')));
  const during = await get(port, '/');
  assert.notEqual(during, 'refused', 'a callback from another address is at least answered while one address holds silent sockets');
  // and from that address itself: its oldest silent socket makes room
  const same = await new Promise<number | 'refused'>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.9' });
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (d) => (data += d));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(/^HTTP\/1\.1 (\d+)/.exec(data) ? Number(/^HTTP\/1\.1 (\d+)/.exec(data)![1]) : 'refused'));
    socket.once('connect', () => socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'));
  });
  assert.notEqual(same, 'refused', 'a callback from the address at its cap');
});

const page = (): Promise<number | string> =>
  new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', localAddress: '127.0.0.1', port: gw.ports.portal!, path: gw.config.portal.path, agent: false },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', (e) => resolve(`error ${(e as NodeJS.ErrnoException).code ?? e.message}`));
    req.end();
  });

test('portal: with 1,024 silent connections from 32 addresses a customer from a 33rd is served', async () => {
  assert.equal(await page(), 200, 'served before');
  for (let a = 0; a < 32; a++) await Promise.all(Array.from({ length: 32 }, () => silent(gw.ports.portal!, `127.0.1.${a + 1}`)));
  const during = await page();
  assert.equal(during, 200, `the customer's portal page while strangers hold silent sockets: ${during}`);
});
