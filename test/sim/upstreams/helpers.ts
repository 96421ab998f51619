// Test fixtures for the upstream proxies: a stub authority (the platform side is not under test here), a
// loopback HTTP target that tells which exit carried a request, curl and raw-socket clients.
import { connect, type Socket } from 'node:net';
import type { DrawnCredential, Grant, Meter, UpstreamAuthority } from '../../../src/sim/contracts.ts';
import { runCurl } from '../../support/curl.ts';
import { startHttpTarget } from '../../support/target.ts';

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

/** /ip answers the peer address (the exit); /bytes/N and /stream/N answer N bytes paced by the socket (test/support/target.ts). */
export const startTarget: () => Promise<Target> = startHttpTarget;

export interface CurlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function curl(args: string[]): Promise<CurlResult> {
  const r = await runCurl(args, { maxTimeS: 10 });
  return { code: r.exitCode, stdout: r.stdout, stderr: r.stderr };
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
