// Reads a rate-limited user's upstream socket in pieces sized to its rate. Node reads a socket 64 KiB at a
// time and, once paused, still fills its readable buffer (16 KiB) before it stops: for a 10 KiB/s user one
// read is six seconds of its rate, taken from the upstream (and charged by the platform) before the bucket
// can say no. A paced socket reads into a buffer of 1/16 s of the rate (1–64 KiB, chosen again at every read,
// so a changed rate is followed), stops reading the moment it is paused, and keeps no more than one such piece
// buffered: what Rotor takes from the upstream stays within one piece of what the rate allows.
//
// This is node's own `onread` (a socket reading into buffers it is given, net.connect's documented option),
// switched on for a socket that is already connected: upstream sockets are dialed (or kept warm) before it is
// known whose traffic they carry. It reaches into node's socket internals, so it is feature-checked: where
// they are missing (another node, a TLS socket) the socket keeps node's reads and the rate still holds over
// time, in coarser steps (test/proxy/throttle.test.ts fails then).
import { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';

const KiB = 1024;

/** Bytes per read for a rate: 1/16 s of it, at least 1 KiB, at most node's own 64 KiB. */
export function readSizeFor(rateBytesPerSec: number): number {
  if (!(rateBytesPerSec > 0)) return 64 * KiB;
  return Math.min(64 * KiB, Math.max(KiB, Math.floor(rateBytesPerSec / 16)));
}

/** The rate a paced socket reads at (the user's limiter: read again at every read). */
export interface RateSource {
  readonly rateBytesPerSec?: number;
}

interface StreamHandle {
  useUserBuffer?: (buffer: Uint8Array) => void;
}

/** The socket internals `onread` is made of (node 20: net.js kBuffer, kBufferCb, kBufferGen). */
interface SocketInternals {
  _handle: StreamHandle | null;
  _readableState: { highWaterMark: number };
  push(chunk: Buffer | null): boolean;
}

const internals = ((): { buffer: symbol; callback: symbol; generator: symbol } | undefined => {
  const probe = new Socket();
  const keys = new Map(Object.getOwnPropertySymbols(probe).map((s) => [s.description, s]));
  probe.destroy();
  const buffer = keys.get('kBuffer');
  const callback = keys.get('kBufferCb');
  const generator = keys.get('kBufferGen');
  return buffer && callback && generator ? { buffer, callback, generator } : undefined;
})();

const PACED = Symbol('rotor.paced');
type Paced = Socket & { [PACED]?: true };

/** A read landed in the socket's own buffer: it goes on as node's read would have (false = stop reading). */
function pushRead(this: SocketInternals, n: number, buffer: Buffer): boolean {
  return this.push(n === buffer.length ? buffer : buffer.subarray(0, n));
}

/**
 * Paces `socket`'s reads to `rate` from now on (idempotent). False when the socket cannot be paced (closed,
 * TLS, or node's internals are not the expected ones): it then reads as before.
 */
export function paceReads(socket: Socket, rate: RateSource): boolean {
  const s = socket as Paced;
  if (s[PACED]) return true;
  const inner = socket as unknown as SocketInternals & Record<symbol, unknown>;
  const handle = inner._handle;
  if (internals === undefined || handle === null || typeof handle.useUserBuffer !== 'function' || socket instanceof TLSSocket) return false;
  // A fresh buffer per read: the piece read is handed on (to the client's socket) and must not be overwritten.
  const next = (): Buffer => Buffer.allocUnsafe(readSizeFor(rate.rateBytesPerSec ?? 0));
  const first = next();
  inner[internals.buffer] = first;
  inner[internals.generator] = next;
  inner[internals.callback] = pushRead;
  // Paused, the socket reads ahead only up to this (one piece), not node's 16 KiB.
  inner._readableState.highWaterMark = first.length;
  handle.useUserBuffer(first);
  s[PACED] = true;
  return true;
}

/** Whether `socket` reads in paced pieces. */
export function isPaced(socket: Socket): boolean {
  return (socket as Paced)[PACED] === true;
}
