// The one loopback HTTP target of the tests (what a client reaches through a proxy):
//   GET /hello            "hello from target"
//   POST /echo            the request body
//   GET /bytes/<n>        n bytes of 'a' in 16 KiB writes paced by the reader;
//   GET /bytes/<n>?rate=r the same, paced by the server's own clock at r bytes per second (a download that
//                         is slow at the source: kernel buffers along a proxy chain would otherwise swallow
//                         megabytes ahead of a slow client)
//   GET /stream/<n>       as /bytes/<n>
//   GET /ip, and anything else: the peer address as text (also in `x-remote-address`): which exit was used
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeBytes } from './bytes.ts';

export interface HttpTarget {
  port: number;
  /** http://127.0.0.1:<port><path> */
  url(path?: string): string;
  /** Requests answered so far. */
  readonly requests: number;
  server: Server;
  close(): Promise<void>;
}

const PIECE = Buffer.alloc(16 * 1024, 0x61);
const TICK_MS = 20;

export async function startHttpTarget(): Promise<HttpTarget> {
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    const url = req.url ?? '/';
    if (url === '/hello') {
      res.end('hello from target');
      return;
    }
    if (url === '/echo') {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => res.end(Buffer.concat(parts)));
      return;
    }
    const bytes = /^\/(?:bytes|stream)\/(\d+)(?:\?rate=(\d+))?$/.exec(url);
    if (bytes) {
      let left = Number(bytes[1]);
      const rate = bytes[2] ? Number(bytes[2]) : 0;
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(left) });
      if (rate === 0) {
        writeBytes(res, left, PIECE);
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      const perTick = Math.max(1, Math.round((rate * TICK_MS) / 1000));
      const paced = (): void => {
        const n = Math.min(left, perTick);
        left -= n;
        res.write(Buffer.alloc(n, 0x61));
        if (left > 0) timer = setTimeout(paced, TICK_MS);
        else res.end();
      };
      res.on('close', () => {
        left = 0;
        if (timer) clearTimeout(timer);
      });
      paced();
      return;
    }
    const remote = req.socket.remoteAddress ?? '';
    res.setHeader('x-remote-address', remote);
    res.setHeader('content-type', 'text/plain');
    res.end(remote);
  });
  server.on('clientError', (_e, s) => s.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: (path = '/') => `http://127.0.0.1:${port}${path}`,
    get requests() {
      return requests;
    },
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
