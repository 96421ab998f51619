// What a target reads of a forwarded plain-HTTP request: exactly the one request the client sent, framed, with the
// client's end-to-end headers as sent.
//   - A body is framed whatever the method: node:http's client chunks a body only when the head says so (or by
//     default for POST-like methods), so a GET/DELETE/OPTIONS whose chunked body lost its Transfer-Encoding went out
//     unframed and the target read the body as a second request; and Content-Length is never dropped because the
//     Connection header names it.
//   - A header whose name is an Object.prototype member (constructor, toString, __proto__) reaches the target once,
//     with the client's value (it was read as "already there" and sent as [the inherited function, value]; __proto__
//     was lost).
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { after, before, test } from 'node:test';
import { poll } from '../support/wait.ts';
import { startGateway, type Gateway } from './harness.ts';

let gw: Gateway;
let target: Server;
/** The heads the target read, and the bodies by their framing (Content-Length, or chunked de-chunked). */
const seen: { head: string; body: string }[] = [];

/** Reads a chunked body from `buf` at `at`: [body, end] or undefined when not all there yet. */
function chunked(buf: Buffer, at: number): [string, number] | undefined {
  let body = '';
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    if (eol < 0) return undefined;
    const size = parseInt(buf.subarray(at, eol).toString('latin1'), 16);
    if (size === 0) return buf.length >= eol + 4 ? [body, eol + 4] : undefined;
    if (buf.length < eol + 2 + size + 2) return undefined;
    body += buf.subarray(eol + 2, eol + 2 + size).toString('latin1');
    at = eol + 2 + size + 2;
  }
}

before(async () => {
  gw = await startGateway({});
  // A keep-alive origin with a parser of its own: heads by blank line, bodies by Content-Length or chunked,
  // nothing else (a head with neither has no body, RFC 9112 §6.3); every request read is answered.
  target = createServer((s) => {
    let buf = Buffer.alloc(0);
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString('latin1');
        let body = '';
        let next = end + 4;
        if (/\r\ntransfer-encoding:[^\r]*chunked/i.test(head)) {
          const got = chunked(buf, next);
          if (got === undefined) return;
          [body, next] = got;
        } else {
          const len = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
          if (buf.length < next + len) return;
          body = buf.subarray(next, next + len).toString('latin1');
          next += len;
        }
        seen.push({ head, body });
        buf = buf.subarray(next);
        s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
      }
    });
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
});
after(async () => {
  target?.close();
  await gw?.close();
});

const auth = `Proxy-Authorization: Basic ${Buffer.from('alice:alice-pass').toString('base64')}\r\n`;
const port = (): number => (target.address() as AddressInfo).port;

/** Sends `payload` on a new client connection; resolves with what came back once the first answer is whole. */
function send(payload: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = '';
    const s = connect(gw.ports.http, '127.0.0.1', () => s.write(Buffer.from(payload, 'latin1')));
    s.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
      if (/\r\n\r\nok/.test(answer)) {
        s.destroy();
        resolve(answer);
      }
    });
    s.on('close', () => resolve(answer));
    s.on('error', reject);
  });
}

/** The request lines the target read for one client request (a second one, if any, given time to be read). */
async function requestLines(): Promise<string[]> {
  await poll(() => seen.length >= 2 || undefined, { timeoutMs: 500 }).catch(() => undefined);
  return seen.map((r) => r.head.split('\r\n')[0]!);
}

const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: other.example\r\n\r\n';
const chunk = `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;

for (const method of ['GET', 'DELETE', 'OPTIONS', 'POST']) {
  test(`a ${method} with a chunked body reaches the target as one request, its body whole`, async () => {
    seen.length = 0;
    const answer = await send(
      `${method} http://127.0.0.1:${port()}/first HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\n${auth}Transfer-Encoding: chunked\r\n\r\n${chunk}`,
    );
    assert.match(answer, /^HTTP\/1\.1 200 /);
    assert.deepEqual(await requestLines(), [`${method} /first HTTP/1.1`], `the target read: ${JSON.stringify(seen)}`);
    assert.equal(seen[0]!.body, smuggled, 'the body, as the client sent it');
  });
}

test('a GET whose Connection header names Content-Length: the length goes on, the body is not a second request', async () => {
  seen.length = 0;
  const answer = await send(
    `GET http://127.0.0.1:${port()}/first HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\n${auth}Connection: keep-alive, Content-Length\r\n` +
      `Content-Length: ${smuggled.length}\r\n\r\n${smuggled}`,
  );
  assert.match(answer, /^HTTP\/1\.1 200 /);
  assert.deepEqual(await requestLines(), ['GET /first HTTP/1.1'], `the target read: ${JSON.stringify(seen)}`);
  assert.equal(seen[0]!.body, smuggled);
});

test('a GET without a body goes on without framing headers', async () => {
  seen.length = 0;
  await send(`GET http://127.0.0.1:${port()}/plain HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\n${auth}\r\n`);
  assert.deepEqual(await requestLines(), ['GET /plain HTTP/1.1']);
  assert.doesNotMatch(seen[0]!.head, /\r\n(transfer-encoding|content-length):/i);
});

const lines = (head: string, name: string): string[] =>
  head.split('\r\n').filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));

for (const name of ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__']) {
  test(`a client header named ${name} reaches the target once, as sent`, async () => {
    seen.length = 0;
    await send(
      `GET http://127.0.0.1:${port()}/h HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\n${auth}${name}: one\r\nX-After: 1\r\n${name}: two\r\n\r\n`,
    );
    await poll(() => seen[0], { timeoutMs: 5000, what: 'the request at the target' });
    assert.deepEqual(lines(seen[0]!.head, name), [`${name}: one`, `${name}: two`], `the target read:\n${seen[0]!.head}`);
    assert.deepEqual(lines(seen[0]!.head, 'x-after'), ['X-After: 1']);
  });
}
