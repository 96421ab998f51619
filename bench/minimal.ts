// The benchmark's yardstick: the smallest Node gateway that does Rotor's job for one user, written the way
// anyone would with Node's own modules. Basic (HTTP) and RFC 1929 (SOCKS5) auth against one user, one fixed
// upstream per listener (an HTTP proxy behind the HTTP listener, a SOCKS5 proxy behind the SOCKS5 one),
// bytes moved with pipe(). No pool, no sessions, no metering, no timeouts beyond Node's defaults.
//
//   node bench/minimal.ts '{"user":"u","password":"p","http":{"port":N},"socks5":{"port":N,"username":"u","password":"p"}}'
//
// Prints one JSON line {"http","socks5","pid"} once listening; SIGTERM exits.
import { Agent, createServer as createHttpServer, request } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';

interface Spec {
  user: string;
  password: string;
  http: { port: number; username?: string; password?: string };
  socks5: { port: number; username: string; password: string };
}

const spec = JSON.parse(process.argv[2] ?? '') as Spec;
const expected = `Basic ${Buffer.from(`${spec.user}:${spec.password}`).toString('base64')}`;
const upstreamAuth = spec.http.username
  ? `Basic ${Buffer.from(`${spec.http.username}:${spec.http.password ?? ''}`).toString('base64')}`
  : undefined;
const agent = new Agent({ keepAlive: true });
const HOP = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

// ── HTTP: absolute-URI requests forwarded to the upstream proxy over kept-alive connections; CONNECT tunneled.
const http = createHttpServer((req, res) => {
  if (req.headers['proxy-authorization'] !== expected) {
    res.writeHead(407, { 'proxy-authenticate': 'Basic realm="minimal"', 'content-length': '0' }).end();
    return;
  }
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
  if (upstreamAuth) headers['proxy-authorization'] = upstreamAuth;
  const up = request({ host: '127.0.0.1', port: spec.http.port, method: req.method, path: req.url, headers, agent }, (answer) => {
    const out: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(answer.headers)) if (v !== undefined && !HOP.has(k)) out[k] = v;
    res.writeHead(answer.statusCode ?? 502, out);
    answer.pipe(res);
  });
  up.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'content-length': '0' }).end();
    else res.destroy();
  });
  req.pipe(up);
});

http.on('connect', (req, client: Socket, head: Buffer) => {
  client.on('error', () => {});
  if (req.headers['proxy-authorization'] !== expected) {
    client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="minimal"\r\nContent-Length: 0\r\n\r\n');
    return;
  }
  const up = connect({ host: '127.0.0.1', port: spec.http.port, noDelay: true }, () => {
    up.write(`CONNECT ${req.url} HTTP/1.1\r\nHost: ${req.url}\r\n${upstreamAuth ? `Proxy-Authorization: ${upstreamAuth}\r\n` : ''}\r\n`);
  });
  up.on('error', () => client.destroy());
  client.on('close', () => up.destroy());
  let answer = Buffer.alloc(0);
  const onAnswer = (chunk: Buffer): void => {
    answer = Buffer.concat([answer, chunk]);
    const end = answer.indexOf('\r\n\r\n');
    if (end < 0) return;
    up.off('data', onAnswer);
    if (answer.toString('latin1', 9, 12) !== '200') {
      client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n');
      up.destroy();
      return;
    }
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (answer.length > end + 4) client.write(answer.subarray(end + 4));
    if (head.length > 0) up.write(head);
    client.pipe(up);
    up.pipe(client);
  };
  up.on('data', onAnswer);
});

// ── SOCKS5: RFC 1929 against the one user, then the same handshake, message by message, to the upstream.
const USER = Buffer.from(spec.socks5.username);
const PASS = Buffer.from(spec.socks5.password);
const socks = createServer({ noDelay: true }, (client) => {
  client.on('error', () => {});
  let buffer = Buffer.alloc(0);
  let step = 0;
  const onData = (chunk: Buffer): void => {
    buffer = Buffer.concat([buffer, chunk]);
    if (step === 0) {
      if (buffer.length < 2 || buffer.length < 2 + buffer[1]!) return;
      buffer = buffer.subarray(2 + buffer[1]!);
      client.write(Buffer.from([5, 2]));
      step = 1;
    }
    if (step === 1) {
      if (buffer.length < 2) return;
      const ul = buffer[1]!;
      if (buffer.length < 3 + ul || buffer.length < 3 + ul + buffer[2 + ul]!) return;
      const pl = buffer[2 + ul]!;
      const ok = buffer.toString('utf8', 2, 2 + ul) === spec.user && buffer.toString('utf8', 3 + ul, 3 + ul + pl) === spec.password;
      buffer = buffer.subarray(3 + ul + pl);
      client.write(Buffer.from([1, ok ? 0 : 1]));
      if (!ok) return void client.end();
      step = 2;
    }
    if (step === 2) {
      if (buffer.length < 5) return;
      const len = buffer[3] === 1 ? 10 : buffer[3] === 4 ? 22 : 7 + buffer[4]!;
      if (buffer.length < len) return;
      const requestBytes = buffer.subarray(0, len);
      const rest = buffer.subarray(len);
      client.off('data', onData);
      client.pause();
      dialSocks(requestBytes, client, rest);
    }
  };
  client.on('data', onData);
});

/** The upstream SOCKS5 handshake (greeting, auth, request, one answer each), then the reply and pipe(). */
function dialSocks(requestBytes: Buffer, client: Socket, rest: Buffer): void {
  const up = connect({ host: '127.0.0.1', port: spec.socks5.port, noDelay: true }, () => up.write(Buffer.from([5, 1, 2])));
  up.on('error', () => client.destroy());
  client.on('close', () => up.destroy());
  let step = 0;
  let buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    buffer = Buffer.concat([buffer, chunk]);
    if (step === 0 && buffer.length >= 2) {
      buffer = buffer.subarray(2);
      up.write(Buffer.concat([Buffer.from([1, USER.length]), USER, Buffer.from([PASS.length]), PASS]));
      step = 1;
    }
    if (step === 1 && buffer.length >= 2) {
      buffer = buffer.subarray(2);
      up.write(requestBytes);
      step = 2;
    }
    if (step === 2 && buffer.length >= 5) {
      const len = buffer[3] === 1 ? 10 : buffer[3] === 4 ? 22 : 7 + buffer[4]!;
      if (buffer.length < len) return;
      up.off('data', onData);
      client.write(buffer.subarray(0, len));
      if (buffer.length > len) client.write(buffer.subarray(len));
      if (rest.length > 0) up.write(rest);
      client.pipe(up);
      up.pipe(client);
    }
  };
  up.on('data', onData);
}

http.listen(0, '127.0.0.1', () => {
  socks.listen(0, '127.0.0.1', () => {
    const port = (s: { address(): unknown }): number => (s.address() as { port: number }).port;
    process.stdout.write(`${JSON.stringify({ http: port(http), socks5: port(socks), pid: process.pid })}\n`);
  });
});
process.on('SIGTERM', () => process.exit(0));
process.on('disconnect', () => process.exit(0));
