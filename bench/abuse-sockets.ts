// Where the bytes of a never-read pipelined download sit (issue 23, upstream bytes with 4 × 500 pipelined
// requests): one client connection writes PIPELINED GETs of 200 KB objects through the in-process daemon and
// never reads; once the target stops writing, `ss -tmi` is read for the four sockets of the path (target →
// Rotor's upstream socket → Rotor's client socket → the client) and their queues are set against what the
// target wrote. Usage: node --import tsx bench/abuse-sockets.ts  [PIPELINED=500]
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { startGateway } from '../test/e2e/harness.ts';

const PIPELINED = Number(process.env.PIPELINED ?? 500);
const SIZE = 200_000;
const PIECE = Buffer.alloc(16 * 1024, 7);

let written = 0;
const target: Server = createServer((_req, res) => {
  let left = SIZE;
  res.writeHead(200, { 'content-length': String(SIZE) });
  const pump = (): void => {
    while (left > 0) {
      const n = Math.min(left, PIECE.length);
      left -= n;
      written += n;
      if (!res.write(PIECE.subarray(0, n))) return void res.once('drain', pump);
    }
    res.end();
  };
  pump();
});
await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
const tport = (target.address() as AddressInfo).port;
const gw = await startGateway({ config: { users: [{ name: 'u', password: 'u-pass', mainAccount: 'shop1' }] } });
const auth = `Proxy-Authorization: Basic ${Buffer.from('u:u-pass').toString('base64')}\r\n`;
const s = connect({ host: '127.0.0.1', port: gw.ports.http });
s.pause();
await new Promise((r) => s.once('connect', r));
let head = '';
for (let i = 0; i < PIPELINED; i++) head += `GET http://127.0.0.1:${tport}/o${i} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}\r\n`;
s.write(head);
let last = -1;
while (written !== last) {
  last = written;
  await new Promise((r) => setTimeout(r, 1500));
}
const ports = [`:${tport}`, `:${gw.ports.http}`];
const lines = execFileSync('ss', ['-tmin']).toString().split('\n');
let ss = '';
for (let i = 0; i < lines.length; i++) {
  const cols = lines[i]!.trim().split(/\s+/);
  if (cols.length >= 5 && ports.some((p) => cols[3]!.endsWith(p) || cols[4]!.endsWith(p))) ss += `${lines[i]}\n${lines[i + 1] ?? ''}\n`;
}
console.log(
  `target wrote ${written} bytes (${(written / 2 ** 20).toFixed(2)} MiB); tcp_wmem ${execFileSync('cat', ['/proc/sys/net/ipv4/tcp_wmem']).toString().trim()}, tcp_rmem ${execFileSync('cat', ['/proc/sys/net/ipv4/tcp_rmem']).toString().trim()}`,
);
console.log(ss);
s.destroy();
await gw.close();
target.close();
