// Test fixtures for the upstream proxies: a stub authority (the platform side is not under test here), a
// loopback HTTP target that tells which exit carried a request, curl and raw-socket clients.
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { DrawnCredential, Grant, Meter, UpstreamAuthority } from '../../../src/sim/contracts.ts';
import { writeBytes } from '../../support/bytes.ts';

export class StubAuthority implements UpstreamAuthority {
  password = 'secret';
  /** bytes the stub allows in total; exhausted → running relays cut, new ones refused */
  allowance = Infinity;
  used = 0;
  disabled = false;
  whitelisted = new Set<string>();
  whitelistAsks: Array<{ account: string; productNo: string; clientIp: string }> = [];
  instanceCredentials = new Map<string, { username: string; password: string }>();
  credentialsSeen: DrawnCredential[] = [];

  readonly meter: Meter = {
    add: (bytes: number): boolean => {
      this.used += bytes;
      return this.used < this.allowance;
    },
  };

  private balance(): Grant {
    if (this.disabled) return { ok: false, reason: 'account disabled', refusal: 'forbidden' };
    if (this.used >= this.allowance) return { ok: false, reason: 'balance exhausted', refusal: 'forbidden' };
    return { ok: true, meter: this.meter };
  }

  authorizePassword(credential: DrawnCredential, password: string): Grant {
    this.credentialsSeen.push(credential);
    if (password !== this.password) return { ok: false, reason: 'wrong password', refusal: 'credentials' };
    return this.balance();
  }

  authorizeWhitelist(account: string, productNo: string, clientIp: string): Grant {
    this.whitelistAsks.push({ account, productNo, clientIp });
    if (!this.whitelisted.has(clientIp)) return { ok: false, reason: 'address not on the whitelist' };
    return this.balance();
  }

  authorizeInstance(instanceNo: string, username: string, password: string): Grant {
    const current = this.instanceCredentials.get(instanceNo);
    if (!current || current.username !== username || current.password !== password) {
      return { ok: false, reason: 'wrong instance credentials' };
    }
    return this.balance();
  }
}

export interface Target {
  port: number;
  url(path: string): string;
  close(): Promise<void>;
}

/**
 * /ip answers the peer address (the exit); /bytes/N answers N bytes; /stream/N answers N bytes in 64 KiB
 * pieces paced by the socket, for downloads that must be cut while running.
 */
export async function startTarget(): Promise<Target> {
  const server: Server = createServer((req, res) => {
    const url = req.url ?? '/';
    if (url === '/ip') {
      res.end(req.socket.remoteAddress ?? '');
      return;
    }
    const bytes = /^\/(bytes|stream)\/(\d+)$/.exec(url);
    if (bytes) {
      const total = Number(bytes[2]);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
      if (bytes[1] === 'bytes') {
        res.end(Buffer.alloc(total, 0x61));
        return;
      }
      writeBytes(res, total, Buffer.alloc(64 * 1024, 0x62));
      return;
    }
    res.statusCode = 404;
    res.end('not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: (path) => `http://127.0.0.1:${port}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface CurlResult {
  code: number;
  stdout: string;
  stderr: string;
}

const CLEAN_ENV: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !/_proxy$/i.test(k)),
);

export function curl(args: string[]): Promise<CurlResult> {
  return new Promise((resolve) => {
    execFile(
      'curl',
      ['-sS', '--max-time', '10', ...args],
      { env: CLEAN_ENV, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export interface RawExchange {
  socket: Socket;
  /** everything received until the socket closed */
  received: Promise<{ data: Buffer; error: NodeJS.ErrnoException | null }>;
}

/** A plain TCP client that writes `payload` and collects whatever comes back. */
export function raw(port: number, payload?: Buffer | string): RawExchange {
  const socket = connect({ host: '127.0.0.1', port });
  const chunks: Buffer[] = [];
  let error: NodeJS.ErrnoException | null = null;
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('error', (e: NodeJS.ErrnoException) => (error = e));
  if (payload !== undefined) socket.write(payload);
  const received = new Promise<{ data: Buffer; error: NodeJS.ErrnoException | null }>((resolve) =>
    socket.on('close', () => resolve({ data: Buffer.concat(chunks), error })),
  );
  return { socket, received };
}

export function connectHead(target: string, user?: string, pass?: string): string {
  const auth = user === undefined ? '' : `Proxy-Authorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}\r\n`;
  return `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`;
}
