// The SOCKS5 server handshake in steps (startSocks5), over real loopback sockets: it pauses at the login with
// the client's credentials and nothing answered, and goes on only when resumed with the caller's decision —
// so the listener decides the login without being called back from the handshake.
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { Socks5HandshakeError, startSocks5, type HandshakeOptions, type Socks5Step } from '../../src/wire/socks5.ts';

let server: Server;
let port: number;
let options: HandshakeOptions<string> = { timeoutMs: 2000, auth: 'password' };
const accepted: ((s: { socket: Socket; first: Promise<Socks5Step<string>> }) => void)[] = [];

before(async () => {
  server = createServer({ allowHalfOpen: true }, (socket) => {
    const first = startSocks5<string>(socket, options);
    first.catch(() => undefined);
    accepted.shift()?.({ socket, first });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
after(() => new Promise<void>((r) => server.close(() => r())));

interface Client {
  socket: Socket;
  /** Resolves once the client has received at least n bytes in all. */
  bytes(n: number): Promise<Buffer>;
  received(): Buffer;
  closed: Promise<void>;
}

async function client(): Promise<{ c: Client; server: { socket: Socket; first: Promise<Socks5Step<string>> } }> {
  const served = new Promise<{ socket: Socket; first: Promise<Socks5Step<string>> }>((r) => accepted.push(r));
  const socket = connect({ host: '127.0.0.1', port });
  const chunks: Buffer[] = [];
  const waiters: (() => void)[] = [];
  socket.on('data', (d: Buffer) => {
    chunks.push(d);
    for (const w of waiters.splice(0)) w();
  });
  socket.on('error', () => undefined);
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  await new Promise<void>((r) => socket.once('connect', () => r()));
  const received = (): Buffer => Buffer.concat(chunks);
  const bytes = async (n: number): Promise<Buffer> => {
    while (received().length < n) await new Promise<void>((r) => waiters.push(r));
    return received();
  };
  return { c: { socket, bytes, received, closed }, server: await served };
}

const GREETING = Buffer.from([5, 1, 2]);
const AUTH = Buffer.concat([Buffer.from([1, 4]), Buffer.from('user'), Buffer.from([4]), Buffer.from('pass')]);
const REQUEST = Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90]);

/** A client that sent the greeting and its credentials; the handshake paused at the login step. */
async function atLogin() {
  options = { timeoutMs: 2000, auth: 'password' };
  const { c, server: s } = await client();
  c.socket.write(Buffer.concat([GREETING, AUTH]));
  const login = await s.first;
  if (login.kind !== 'login') throw new assert.AssertionError({ message: `stopped at ${login.kind}, not the login step` });
  return { c, s, login };
}

test('paused at the login with the credentials, nothing answered; resumed ok: 0x01 0x00, then the request', async () => {
  options = { timeoutMs: 2000, auth: 'password' };
  const { c, server: s } = await client();
  // Everything at once, the request pipelined behind the credentials.
  c.socket.write(Buffer.concat([GREETING, AUTH, REQUEST]));
  const login = await s.first;
  assert.equal(login.kind, 'login');
  if (login.kind !== 'login') return;
  assert.equal(login.credentials, true);
  assert.equal(login.username, 'user');
  assert.equal(login.password, 'pass');
  assert.deepEqual([...(await c.bytes(2))], [5, 2], 'only the method chosen: the login is not answered yet');
  const request = await login.resume({ ok: true, context: 'ctx' });
  assert.equal(request.kind, 'request');
  if (request.kind !== 'request') return;
  assert.deepEqual([request.host, request.port, request.username, request.context], ['127.0.0.1', 8080, 'user', 'ctx']);
  assert.deepEqual([...(await c.bytes(4))], [5, 2, 1, 0]);
  c.socket.destroy();
  s.socket.destroy();
});

test('resumed with a refusal: 0x01 0x01, the socket closed, AUTH_FAILED', async () => {
  const { c, login } = await atLogin();
  await assert.rejects(login.resume({ ok: false }), (e: unknown) => e instanceof Socks5HandshakeError && e.code === 'AUTH_FAILED');
  await c.closed;
  assert.deepEqual([...c.received()], [5, 2, 1, 1]);
});

test('the client leaves while the decision is pending: resume answers CLOSED', async () => {
  const { c, s, login } = await atLogin();
  c.socket.destroy();
  await new Promise<void>((r) => s.socket.once('close', () => r()));
  await assert.rejects(
    login.resume({ ok: true, context: 'late' }),
    (e: unknown) => e instanceof Socks5HandshakeError && e.code === 'CLOSED',
  );
});

test("anonymous: a client offering only 'no authentication' pauses without credentials; ok: 0x00 and on, refused: 0xFF", async () => {
  options = { timeoutMs: 2000, auth: 'password', anonymous: true };
  for (const ok of [true, false]) {
    const { c, server: s } = await client();
    c.socket.write(Buffer.concat([Buffer.from([5, 1, 0]), REQUEST]));
    const login = await s.first;
    assert.equal(login.kind, 'login');
    if (login.kind !== 'login') return;
    assert.deepEqual([login.credentials, login.username, login.password], [false, '', '']);
    assert.equal(c.received().length, 0, 'nothing answered before the decision');
    if (ok) {
      const request = await login.resume({ ok: true, context: 'port' });
      assert.equal(request.kind === 'request' && request.context, 'port');
      assert.deepEqual([...(await c.bytes(2))], [5, 0]);
      c.socket.destroy();
      s.socket.destroy();
    } else {
      await assert.rejects(
        login.resume({ ok: false }),
        (e: unknown) => e instanceof Socks5HandshakeError && e.code === 'NO_ACCEPTABLE_METHOD',
      );
      await c.closed;
      assert.deepEqual([...c.received()], [5, 0xff]);
    }
  }
});

test('without anonymous, such a client is refused at once (0xFF), no login step', async () => {
  options = { timeoutMs: 2000, auth: 'password' };
  const { c, server: s } = await client();
  c.socket.write(Buffer.from([5, 1, 0]));
  await assert.rejects(s.first, (e: unknown) => e instanceof Socks5HandshakeError && e.code === 'NO_ACCEPTABLE_METHOD');
  await c.closed;
  assert.deepEqual([...c.received()], [5, 0xff]);
});
