// The two clients whose paths through the daemon the path measurements follow (test/support/path-modules.ts by
// coverage, test/support/control-path.ts by stacks): a new client connection each, loopback only.
import { once } from 'node:events';
import { request, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';

/** One SOCKS5 connection (RFC 1929 login, CONNECT, a GET through it) from a new client socket; resolves when it closed. */
export async function socks5Get(port: number, user: string, pass: string, targetPort: number): Promise<void> {
  const s = connect({ host: '127.0.0.1', port });
  await once(s, 'connect');
  const u = Buffer.from(user);
  const p = Buffer.from(pass);
  const req = Buffer.from(`GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  const dst = Buffer.from([1, 127, 0, 0, 1, targetPort >> 8, targetPort & 0xff]);
  s.write(Buffer.concat([Buffer.from([5, 1, 2, 1, u.length]), u, Buffer.from([p.length]), p, Buffer.from([5, 1, 0]), dst, req]));
  let got = '';
  s.on('data', (c: Buffer) => (got += c.toString('latin1')));
  await once(s, 'close');
  if (!got.includes('hello from target')) throw new Error(`SOCKS5 answer: ${JSON.stringify(got.slice(0, 80))}`);
}

/** One plain-HTTP request through the proxy from a new client connection. */
export async function httpGet(port: number, user: string, pass: string, targetPort: number): Promise<void> {
  const auth = Buffer.from(`${user}:${pass}`).toString('base64');
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const r = request(
      {
        host: '127.0.0.1',
        port,
        path: `http://127.0.0.1:${targetPort}/hello`,
        agent: false,
        headers: { 'proxy-authorization': `Basic ${auth}`, connection: 'close' },
      },
      resolve,
    );
    r.on('error', reject);
    r.end();
  });
  let body = '';
  for await (const c of res) body += String(c);
  if (!body.includes('hello from target')) throw new Error(`HTTP answer: ${res.statusCode} ${body.slice(0, 80)}`);
  if (!res.socket.destroyed) await once(res.socket, 'close');
}
