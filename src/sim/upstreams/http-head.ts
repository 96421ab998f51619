// Reads and parses one HTTP/1.x request head from a proxy client: bounded in size and time, and strict
// enough that random bytes fail fast (the method must look like one) instead of waiting for a blank line.
import type { Socket } from 'node:net';
import { RotorError } from '../../errors/rotor-error.ts';

export const MAX_HEAD_BYTES = 16 * 1024;

export type HeadFailure = 'TIMEOUT' | 'CLOSED' | 'TOO_LARGE' | 'MALFORMED';

export class HttpHeadError extends RotorError {
  declare readonly code: HeadFailure;
  constructor(code: HeadFailure) {
    super(code, `proxy request head: ${code}`, { httpStatus: 400 });
  }
}

export interface RequestHead {
  method: string;
  target: string;
  version: string;
  /** header lines in order, names as sent */
  headers: Array<[name: string, value: string]>;
  /** bytes after the head (a request body or early tunnel data) */
  rest: Buffer | null;
}

const TERMINATOR = Buffer.from('\r\n\r\n');
const METHOD = /^[A-Z]{1,16}$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const REQUEST_LINE = /^([A-Z]{1,16}) (\S+) (HTTP\/1\.[01])$/;

/** Resolves with the parsed head and leaves the socket paused; rejects after having destroyed nothing. */
export function readRequestHead(socket: Socket, timeoutMs: number): Promise<RequestHead> {
  return new Promise((resolve, reject) => {
    let buffer: Buffer = Buffer.alloc(0);
    let settled = false;
    const timer = setTimeout(() => finish(new HttpHeadError('TIMEOUT')), timeoutMs);

    function finish(result: HttpHeadError | RequestHead): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      if (result instanceof HttpHeadError) reject(result);
      else resolve(result);
    }
    function onClose(): void {
      finish(new HttpHeadError('CLOSED'));
    }
    function onData(chunk: Buffer): void {
      const searchFrom = Math.max(0, buffer.length - 3);
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf(TERMINATOR, searchFrom);
      if (end === -1) {
        if (buffer.length > MAX_HEAD_BYTES) finish(new HttpHeadError('TOO_LARGE'));
        else if (!plausibleStart(buffer)) finish(new HttpHeadError('MALFORMED'));
        return;
      }
      if (end > MAX_HEAD_BYTES) {
        finish(new HttpHeadError('TOO_LARGE'));
        return;
      }
      const rest = buffer.length > end + 4 ? buffer.subarray(end + 4) : null;
      finish(parseHead(buffer.toString('latin1', 0, end), rest) ?? new HttpHeadError('MALFORMED'));
    }

    socket.on('data', onData);
    socket.once('close', onClose);
    socket.resume();
  });
}

/** The method token is complete (or still arriving) and made of upper-case letters. */
function plausibleStart(buffer: Buffer): boolean {
  const space = buffer.indexOf(0x20);
  const token = buffer.toString('latin1', 0, space === -1 ? Math.min(buffer.length, 17) : space);
  return space === -1 ? /^[A-Z]{0,16}$/.test(token) : METHOD.test(token);
}

function parseHead(text: string, rest: Buffer | null): RequestHead | null {
  const lines = text.split('\r\n');
  const match = REQUEST_LINE.exec(lines[0]!);
  if (!match) return null;
  const headers: Array<[string, string]> = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) return null;
    const name = line.slice(0, colon);
    if (!HEADER_NAME.test(name)) return null;
    headers.push([name, line.slice(colon + 1).trim()]);
  }
  return { method: match[1]!, target: match[2]!, version: match[3]!, headers, rest };
}

export function headerValue(head: RequestHead, name: string): string | undefined {
  const lower = name.toLowerCase();
  for (const [n, v] of head.headers) if (n.toLowerCase() === lower) return v;
  return undefined;
}

/** user and password of a `Basic` Proxy-Authorization, or null when absent or malformed. */
export function basicCredentials(head: RequestHead): { username: string; password: string } | null {
  const value = headerValue(head, 'proxy-authorization');
  if (!value) return null;
  const match = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(value);
  if (!match) return null;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/**
 * A plain request's answer as the node passes it back: its final head (after any 1xx; a 101 passes as it is, the
 * connection then being the upgraded protocol's) says `Connection: close`
 * (the target's own Connection, Keep-Alive and Proxy-Connection fields dropped), so the client sends no second
 * request on this connection. The node reads one request head per connection and relays the rest raw to that
 * first target: a second request on a kept connection (with the node's Proxy-Authorization) would reach the target.
 * `feed` answers the bytes to pass on for each chunk read from the target (empty while a head is incomplete).
 */
export class ClosingHeads {
  private pending: Buffer | null = Buffer.alloc(0);

  feed(chunk: Buffer): Buffer {
    if (this.pending === null) return chunk;
    let data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    const out: Buffer[] = [];
    for (;;) {
      const end = data.indexOf(TERMINATOR);
      if (end < 0) {
        // A head past the bound is no head: passed as it came.
        if (data.length > MAX_HEAD_BYTES) break;
        this.pending = data;
        return Buffer.concat(out);
      }
      const lines = data.subarray(0, end).toString('latin1').split('\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!)?.[1] ?? 0);
      if (status >= 100 && status < 200) {
        out.push(data.subarray(0, end + 4));
        data = data.subarray(end + 4);
        // 101: the connection is the upgraded protocol's from here on (its Connection: Upgrade stays).
        if (status === 101) break;
        continue;
      }
      const kept = lines.slice(1).filter((l) => !/^(connection|keep-alive|proxy-connection)[ \t]*:/i.test(l));
      out.push(Buffer.from([lines[0]!, ...kept, 'Connection: close', '', ''].join('\r\n'), 'latin1'));
      data = data.subarray(end + 4);
      break;
    }
    this.pending = null;
    out.push(data);
    return Buffer.concat(out);
  }
}
