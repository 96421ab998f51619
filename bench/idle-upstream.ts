// A SOCKS5 upstream that is its own target, for benches that hold thousands of tunnels (bench/idle-tunnels.ts):
// one process, one socket per tunnel (a real upstream plus a separate target would take two descriptors per
// tunnel in the upstream and one more in the target). It takes any user name and password, answers every
// CONNECT with success (BND 127.0.0.1:0) and then serves the tunnel itself: a request head (up to the blank
// line) gets `HTTP/1.1 200` with a two-byte body and the connection is closed; a tunnel that sends nothing is
// held for as long as the other side keeps it. Greeting, authentication and request may arrive in one write
// (Rotor pipelines them). Run as a child: prints {"pid","port"} on stdout once listening.
import { createServer, type Socket } from 'node:net';

const RESPONSE = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
const GREETING_REPLY = Buffer.from([5, 2]);
const REFUSE_REPLY = Buffer.from([5, 0xff]);
const AUTH_OK = Buffer.from([1, 0]);
const CONNECT_OK = Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 0]);
const HEAD_END = Buffer.from('\r\n\r\n');

/** Bytes the next step needs from `b`, or 0 when `b` holds less than a whole message. */
function need(step: number, b: Buffer): number {
  if (step === 0) return b.length >= 2 ? (b.length >= 2 + b[1]! ? 2 + b[1]! : 0) : 0;
  if (step === 1) {
    if (b.length < 2) return 0;
    const ulen = b[1]!;
    if (b.length < 3 + ulen) return 0;
    const total = 3 + ulen + b[2 + ulen]!;
    return b.length >= total ? total : 0;
  }
  if (b.length < 5) return 0;
  const atyp = b[3]!;
  const total = atyp === 1 ? 10 : atyp === 4 ? 22 : atyp === 3 ? 7 + b[4]! : -1;
  if (total < 0) return -1;
  return b.length >= total ? total : 0;
}

function serve(socket: Socket): void {
  let step = 0;
  let buffer: Buffer = Buffer.alloc(0);
  socket.on('error', () => socket.destroy());
  socket.on('data', (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    while (step < 3) {
      const n = need(step, buffer);
      if (n < 0) return void socket.destroy();
      if (n === 0) return;
      const msg = buffer.subarray(0, n);
      buffer = buffer.subarray(n);
      if (step === 0) {
        const methods = msg.subarray(2);
        if (!methods.includes(2)) return void socket.end(REFUSE_REPLY);
        socket.write(GREETING_REPLY);
      } else if (step === 1) {
        socket.write(AUTH_OK);
      } else {
        socket.write(CONNECT_OK);
      }
      step++;
    }
    // The tunnel: answer one request head, then close.
    if (buffer.indexOf(HEAD_END) >= 0) {
      step = 4;
      buffer = Buffer.alloc(0);
      socket.end(RESPONSE);
    }
  });
}

if (process.argv.includes('--serve')) {
  const server = createServer({ noDelay: true }, serve);
  server.maxConnections = 100_000;
  server.listen({ host: '127.0.0.1', port: 0, backlog: 4096 }, () => {
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    process.stdout.write(`${JSON.stringify({ pid: process.pid, port })}\n`);
  });
  process.on('SIGTERM', () => process.exit(0));
}
