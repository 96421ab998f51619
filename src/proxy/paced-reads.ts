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
import { slotIf, slotOf } from '../wire/socket-slot.ts';

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

// Whether a socket is paced, and a bulk socket's sink, are its slot's `paced` and `bulk` (wire/socket-slot.ts).

/** A read landed in the socket's own buffer: it goes on as node's read would have (false = stop reading). */
function pushRead(this: SocketInternals, n: number, buffer: Buffer): boolean {
  return this.push(n === buffer.length ? buffer : buffer.subarray(0, n));
}

/**
 * Paces `socket`'s reads to `rate` from now on (idempotent). False when the socket cannot be paced (closed,
 * TLS, or node's internals are not the expected ones): it then reads as before.
 */
export function paceReads(socket: Socket, rate: RateSource): boolean {
  if (slotIf(socket)?.paced === true) return true;
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
  slotOf(socket).paced = true;
  return true;
}

/** Whether `socket` reads in paced pieces. */
export function isPaced(socket: Socket): boolean {
  return slotIf(socket)?.paced === true;
}

// Bulk reads. Node reads every socket into a new 64 KiB buffer from malloc, freed only when V8 collects its
// Buffer. A relay allocates almost nothing per chunk, so collections are rare and tens of MiB of read buffers
// pile up between them; the collection frees them all at once, glibc gives the top of its heap back to the
// kernel, and the next reads land in fresh pages: on a bulk tunnel about every page read was a page fault
// (~230 per MiB against the minimal gateway's ~4). A socket that fills node's read (NODE_READ) is switched to a
// read buffer of its own instead, used again for the next read whenever nothing kept the chunk: the readable
// side did not buffer it and the sink's write finished at once (the kernel took it all).
//
// That buffer is BULK_READ, four of node's reads: a read and a write cost about the same system call and the
// same turn of the event loop whatever their size, and the kernel often holds more than 64 KiB by the time a
// busy relay reads (on loopback the sender's write queues it in the sender's time), so a bulk tunnel makes
// a quarter to a third of the reads and writes per MiB (docs/benchmarks.md).
//
// A bulk socket holds its big buffer only while the data flows through at once. A read that does not fill it
// means the kernel had no more queued: the burst is over, and the socket may now wait for minutes (a kept-alive
// tunnel). A chunk that is kept (the sink did not take it at once, or this side is paused) means the sink is
// not taking data as fast as it comes, and the chunk is lent to the sink's write queue. Either way the next read
// lands in a small buffer (BULK_IDLE_READ): a waiting or stalled tunnel holds 4 KiB of its own (and what it
// lent), not 256; a drained big buffer goes back to a short list of spares (BULK_SPARES), a lent one is left to
// the collector. A read that fills the small buffer while the sink takes at once takes a big one again. Node has
// no way to hand a socket a new buffer between reads, so the switch happens at the read that shows the change.

/** Node's own read size: a relay side whose read fills it carries bulk data (relay.ts switches it). */
export const NODE_READ = 64 * KiB;
/** Bytes per bulk read. */
export const BULK_READ = 256 * KiB;
/** Bytes per read of a bulk socket that drained the kernel's queue (it may now sit idle) or whose sink is full. */
export const BULK_IDLE_READ = 4 * KiB;
/** Spare big buffers kept for sockets whose burst starts again (2 MiB; beyond it they are left to the collector). */
const BULK_SPARES = 8;
const spares: Buffer[] = [];

function bulkBuffer(): Buffer {
  return spares.pop() ?? Buffer.allocUnsafeSlow(BULK_READ);
}

type BulkSocket = SocketInternals & Socket;

/** Where a bulk socket's chunks are written (the relay's other socket). */
interface Sink {
  readonly writableLength: number;
}

interface ReadableInternals {
  _readableState: { length: number };
}

/**
 * The buffer for a bulk socket's next read, from its read callback to node's generator: node calls the one right
 * after the other for the same read, and the generator gets no socket (`this` is unset), so it is handed over here.
 */
let nextBuffer: Buffer | undefined;

/** A bulk read: its chunk goes on as node's read would have; the buffer for the next read is chosen (see above). */
function pushBulk(this: BulkSocket & ReadableInternals, n: number, buffer: Buffer): boolean {
  const more = this.push(n === buffer.length ? buffer : buffer.subarray(0, n));
  const small = buffer.length === BULK_IDLE_READ;
  if (this._readableState.length !== 0 || (slotIf(this)!.bulk as Sink).writableLength !== 0) {
    // Kept: the buffer is lent to the chunk; the sink is not taking at once, so the next read waits in a small one.
    nextBuffer = Buffer.allocUnsafeSlow(BULK_IDLE_READ);
  } else if (n < buffer.length) {
    // Drained: a small buffer while the socket waits (a small one is used again); a big one is a spare.
    if (!small) {
      if (spares.length < BULK_SPARES) spares.push(buffer);
      nextBuffer = Buffer.allocUnsafeSlow(BULK_IDLE_READ);
    }
  } else if (small) {
    // The small buffer filled and the sink took it at once: a burst is flowing again.
    nextBuffer = bulkBuffer();
  }
  return more;
}

/** After each bulk read: undefined keeps the same buffer; otherwise the one pushBulk chose. */
function nextBulk(): Buffer | undefined {
  const next = nextBuffer;
  nextBuffer = undefined;
  return next;
}

/**
 * Switches `socket` (a relay's side, whose chunks are written to `sink`) to bulk reads: one read buffer of its
 * own, used again while the sink's writes finish at once. False when it cannot (closed, TLS, paced already, or
 * node's internals are not the expected ones): it keeps node's reads.
 */
export function bulkReads(socket: Socket, sink: Sink): boolean {
  const inner = socket as unknown as SocketInternals & Record<symbol, unknown>;
  const handle = inner._handle;
  if (internals === undefined || handle === null || typeof handle.useUserBuffer !== 'function' || socket instanceof TLSSocket) return false;
  const slot = slotOf(socket);
  if (slot.paced || slot.bulk !== undefined) return false;
  const first = bulkBuffer();
  slot.bulk = sink;
  inner[internals.buffer] = first;
  inner[internals.generator] = nextBulk;
  inner[internals.callback] = pushBulk;
  handle.useUserBuffer(first);
  return true;
}

/** Whether `socket` reads into a buffer of its own (bulkReads). */
export function isBulk(socket: Socket): boolean {
  return slotIf(socket)?.bulk !== undefined;
}

/** The size of the buffer a bulk socket's next read lands in (undefined for any other socket). */
export function bulkReadSize(socket: Socket): number | undefined {
  if (!isBulk(socket) || internals === undefined) return undefined;
  return ((socket as unknown as Record<symbol, unknown>)[internals.buffer] as Buffer).length;
}
