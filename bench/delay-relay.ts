// A TCP relay that puts an upstream `rttMs` away (bench/rtt.ts, `npm run bench -- --rtt 20`): a connection is
// as if established one round trip after the client's connect (the client's first bytes reach the upstream
// no earlier than 1.5 round trips after it), and every chunk then takes half a round trip each way, in order.
// Run as a child: `node --import tsx bench/delay-relay.ts '{"upstreamPort":N,"rttMs":20}'`; prints
// {"port","pid"} once listening on 127.0.0.1. Loopback only.
import { createServer, connect, type Socket } from 'node:net';

const spec = JSON.parse(process.argv[2] ?? '{}') as { upstreamPort: number; rttMs: number };
const half = spec.rttMs / 2;

/** Forwards from → to, each chunk released at max(its arrival + half, notBefore). Order is kept. */
function delayed(from: Socket, to: Socket, notBefore: number): void {
  let last = 0;
  from.on('data', (chunk: Buffer) => {
    const at = Math.max(performance.now() + half, notBefore, last);
    last = at;
    setTimeout(
      () => {
        if (!to.destroyed) to.write(chunk);
      },
      Math.max(0, at - performance.now()),
    );
  });
  from.once('end', () => {
    setTimeout(() => to.end(), Math.max(0, Math.max(last, performance.now() + half) - performance.now()));
  });
}

const server = createServer((client) => {
  const acceptedAt = performance.now();
  const upstream = connect({ host: '127.0.0.1', port: spec.upstreamPort });
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  const close = (): void => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close);
  upstream.on('error', close);
  client.on('close', () => setTimeout(() => upstream.destroy(), half));
  upstream.on('close', () => setTimeout(() => client.destroy(), half));
  // The TCP handshake costs a round trip: the client's data leaves after it, then travels half of one.
  delayed(client, upstream, acceptedAt + spec.rttMs + half);
  delayed(upstream, client, 0);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ port, pid: process.pid })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
