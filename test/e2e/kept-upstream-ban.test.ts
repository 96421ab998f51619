// Destination rules set while a customer has kept-alive upstream connections to the target: its plain-HTTP
// requests that would ride one are refused 403, nothing sent to the target, as a fresh dial's are. A kept connection
// skips the dial, where the rules were checked: a customer that kept asking (an idle connection lives 30 s after
// each use) never met a ban — on its own kept-alive client connection, through a sticky session's connections
// (shared by all its client connections), or after an operator's proxy.rules change by reload.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { startHttpTarget, type HttpTarget } from '../support/target.ts';
import { startGateway, type Gateway } from './harness.ts';

const TOKEN = 'kept-ban-token';
let gw: Gateway;
let target: HttpTarget;

before(async () => {
  gw = await startGateway({ config: { admin: { token: TOKEN } } });
  target = await startHttpTarget();
  for (const name of ['keptban', 'keptsess', 'keptglobal']) {
    const made = await gw.admin('/v1/users', { body: { name, password: `${name}-pass-1`, mainAccount: 'shop1' } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
  }
});
after(async () => {
  await target?.close();
  await gw?.close();
});

/** A kept-alive client connection: one request at a time, one Content-Length-framed answer read for each. */
class Client {
  private buf = '';
  private waiting: ((s: string) => void) | undefined;
  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf += d.toString('latin1');
      this.take();
    });
    socket.on('error', () => undefined);
  }
  static async open(): Promise<Client> {
    const s = connect(gw.ports.http, '127.0.0.1');
    await new Promise((r) => s.once('connect', r));
    return new Client(s);
  }
  private take(): void {
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0 || !this.waiting) return;
    const len = Number(/content-length: *(\d+)/i.exec(this.buf.slice(0, end))?.[1] ?? 0);
    if (this.buf.length < end + 4 + len) return;
    const msg = this.buf.slice(0, end + 4 + len);
    this.buf = this.buf.slice(end + 4 + len);
    const w = this.waiting;
    this.waiting = undefined;
    w(msg);
  }
  get(user: string): Promise<string> {
    const auth = Buffer.from(`${user}:${user.split('-')[0]}-pass-1`).toString('base64');
    return new Promise((resolve, reject) => {
      this.waiting = resolve;
      this.socket.once('close', () => reject(new Error(`closed; read so far ${JSON.stringify(this.buf)}`)));
      this.socket.write(`GET ${target.url('/hello')} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
      this.take();
    });
  }
  close(): void {
    this.socket.destroy();
  }
}

const status = (msg: string): number => Number(msg.slice(9, 12));

/** The request after the ban, on `c`: refused 403 with the dial's refusal, and the target read nothing. */
async function refusedOn(c: Client, user: string): Promise<void> {
  const before = target.requests;
  const answer = await c.get(user);
  c.close();
  assert.equal(target.requests, before, `the banned target was reached (answer: ${answer.split('\r\n')[0]})`);
  assert.equal(status(answer), 403, answer);
  assert.match(answer, new RegExp(`target port ${target.port} is not allowed`));
}

test('a ban set while a kept upstream connection is idle: the next request on the same client connection is refused', async () => {
  const c = await Client.open();
  assert.equal(status(await c.get('keptban')), 200);
  const patched = await gw.admin('/v1/users/keptban', { method: 'PATCH', body: { rules: { denyPorts: [target.port] } } });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
  await refusedOn(c, 'keptban');
});

test("a ban set on a customer with a sticky session: a new client connection does not ride the session's kept upstream", async () => {
  const c = await Client.open();
  // The session's first request binds its node (that connection is not kept); the second one's is kept.
  assert.equal(status(await c.get('keptsess-session-s1')), 200);
  assert.equal(status(await c.get('keptsess-session-s1')), 200);
  c.close();
  const patched = await gw.admin('/v1/users/keptsess', { method: 'PATCH', body: { rules: { denyPorts: [target.port] } } });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
  await refusedOn(await Client.open(), 'keptsess-session-s1');
});

test("the operator's proxy.rules changed by a reload: a kept-alive client connection's next request is refused", async () => {
  const c = await Client.open();
  assert.equal(status(await c.get('keptglobal')), 200);
  const config = gw.daemon.config;
  await gw.daemon.reload({
    ...config,
    proxy: { ...config.proxy, rules: { ...config.proxy.rules, denyPorts: [...config.proxy.rules.denyPorts, target.port] } },
  });
  await refusedOn(c, 'keptglobal');
});
