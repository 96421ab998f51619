// A target's answer whose status line node:http's client parser takes but its server will not write (a control
// byte in the reason phrase, a status code under 100), for a customer without request rules and for one whose
// body rule holds the answer first: the client is answered 502 (Proxy-Status error=http_protocol_error), the record ends as an upstream error, and the daemon goes
// on serving (the same process, another request right after). Before the fix ServerResponse.writeHead threw in
// the upstream request's 'response' listener: an uncaught exception, `rotor start` exited.
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { after, before, test } from 'node:test';
import { startHttpTarget, type HttpTarget } from '../support/target.ts';
import { poll } from '../support/wait.ts';
import { startGateway, type Gateway } from './harness.ts';

const TOKEN = 'status-line-token';
let gw: Gateway;
let good: HttpTarget;

before(async () => {
  gw = await startGateway({ config: { admin: { token: TOKEN } } });
  good = await startHttpTarget();
  // A body pattern holds the head and the first body bytes before they are passed on (request-rules-body.ts).
  const made = await gw.admin('/v1/users', {
    body: { name: 'held', password: 'held-pass-1', mainAccount: 'shop1', requestRules: [{ body: 'captcha', action: 'tag' }] },
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
});
after(async () => {
  await good?.close();
  await gw?.close();
});

/** A raw target that sends `answer` to any request (its own port: the record of its request is told by it). */
async function hostile(answer: string): Promise<Server> {
  const server = createServer((s) => {
    s.once('data', () => s.end(Buffer.from(answer, 'latin1')));
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return server;
}

const auth = (user: string, pass: string): string => `Proxy-Authorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}\r\n`;

/** One request on a new client connection; resolves with what came back when Rotor closed it (or after 10 s). */
function send(url: string, user = 'alice', pass = 'alice-pass'): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const head = `GET ${url} HTTP/1.1\r\nHost: x\r\n${auth(user, pass)}Connection: close\r\n\r\n`;
    const s = connect(gw.ports.http, '127.0.0.1', () => s.write(head));
    s.setTimeout(10_000, () => s.destroy());
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('close', () => resolve(got));
    s.on('error', reject);
  });
}

type ConnectionRecord = { target?: string; result?: string; reason?: string };

for (const [what, status, user, pass] of [
  ['a control byte in the reason phrase', 'HTTP/1.1 200 O\x01K', 'alice', 'alice-pass'],
  ['DEL in the reason phrase', 'HTTP/1.1 200 O\x7fK', 'alice', 'alice-pass'],
  ['status code 099', 'HTTP/1.1 099 OK', 'alice', 'alice-pass'],
  ['status code 000', 'HTTP/1.1 000 OK', 'alice', 'alice-pass'],
  ['a control byte in the reason phrase, held by a body rule', 'HTTP/1.1 200 O\x01K', 'held', 'held-pass-1'],
] as const) {
  test(`a target answering with ${what}: 502 http_protocol_error, the record ends, the daemon serves on`, async (t) => {
    const server = await hostile(`${status}\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok`);
    t.after(() => server.close());
    const port = (server.address() as AddressInfo).port;
    const got = await send(`http://127.0.0.1:${port}/`, user, pass);
    assert.match(got, /^HTTP\/1\.1 502 Bad Gateway\r\n/, `the client read ${JSON.stringify(got.slice(0, 200))}`);
    assert.match(got, /\r\nProxy-Status: rotor; error=http_protocol_error/i);
    assert.doesNotMatch(got, /\r\n\r\n[\s\S]*ok$/, "none of the target's body reached the client");
    // The record ended as an upstream error (not left in the live list).
    const rec = await poll(
      async () =>
        (await gw.admin<{ items: ConnectionRecord[] }>(`/v1/connections?user=${user}&limit=100`)).body.items.find(
          (r) => r.target === `127.0.0.1:${port}`,
        ),
      { timeoutMs: 5000, what: 'the request record' },
    );
    assert.equal(rec.result, 'upstream_error', JSON.stringify(rec));
    // The same process answers the next request.
    const next = await send(good.url('/hello'));
    assert.match(next, /^HTTP\/1\.1 200 [\s\S]*hello from target$/);
  });
}
