// The benchmark's target, run as its own process: a loopback node:http server with keep-alive.
//   GET /small        -> 64 bytes (the request the latency and tunnel-rate cases make)
//   GET /bytes/<n>    -> n bytes, written in 1 MiB slices paced by the reader (the bulk case)
// Prints one JSON line {"port","pid"} when listening; exits on SIGTERM or when its parent goes away.
import { createServer } from 'node:http';
import { writeBytes } from '../test/support/bytes.ts';

const SMALL = Buffer.alloc(64, 0x61);
const SLICE = Buffer.alloc(1024 * 1024, 0x62);

const server = createServer((req, res) => {
  if (req.url === '/small') {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': SMALL.length });
    res.end(SMALL);
    return;
  }
  const m = /^\/bytes\/(\d+)$/.exec(req.url ?? '');
  if (!m) {
    res.writeHead(404, { 'content-length': 0 });
    res.end();
    return;
  }
  const count = Number(m[1]);
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': count });
  writeBytes(res, count, SLICE);
});
// Idle tunnels (the memory case) hold connections that have not sent a byte yet; nothing here may cut them.
server.keepAliveTimeout = 600_000;
server.headersTimeout = 600_000;
server.requestTimeout = 0;
server.maxConnections = 100_000;
server.listen(Number(process.env.BENCH_TARGET_PORT ?? 0), '127.0.0.1', () => {
  const a = server.address();
  if (!a || typeof a === 'string') throw new Error('target has no address');
  process.stdout.write(`${JSON.stringify({ port: a.port, pid: process.pid })}\n`);
});

const stop = (): void => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.on('disconnect', stop);
