// Raw-socket plumbing for the fuzz tests: send one input, collect what comes back, and report whether the
// server closed, answered, or held the connection past its bound. Bounded concurrency keeps 10,000 cases fast.
import { connect } from 'node:net';

export interface Exchange {
  /** bytes the server sent */
  reply: Buffer;
  /** the server closed (or reset) the connection */
  closed: boolean;
  /** ms from the last write to the close (or to giving up) */
  ms: number;
}

export interface SendOptions {
  port: number;
  /** chunks written with a short pause between them (exercises partial reads) */
  chunks: Buffer[];
  /** half-close after writing */
  end: boolean;
  /** give up (and report closed: false) after this long */
  deadlineMs: number;
  /** stop waiting as soon as the reply satisfies this (the client then closes) */
  enough?: (reply: Buffer) => boolean;
}

export function exchange(o: SendOptions): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: o.port });
    const parts: Buffer[] = [];
    let size = 0;
    let wrote = Date.now();
    let settled = false;
    const finish = (closed: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ reply: Buffer.concat(parts, size), closed, ms: Date.now() - wrote });
    };
    const timer = setTimeout(() => finish(false), o.deadlineMs);
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('data', (d: Buffer) => {
      if (size < 65_536) {
        parts.push(d);
        size += d.length;
      }
      if (o.enough?.(Buffer.concat(parts, size))) finish(true);
    });
    socket.on('connect', () => {
      void (async () => {
        for (let i = 0; i < o.chunks.length; i++) {
          if (socket.destroyed) return;
          socket.write(o.chunks[i]!);
          if (i < o.chunks.length - 1) await new Promise((r) => setImmediate(r));
        }
        wrote = Date.now();
        if (o.end && !socket.destroyed) socket.end();
      })();
    });
  });
}

/** Runs `count` cases with at most `width` in flight; collects the failures `run` reports. */
export async function batch<T>(count: number, width: number, run: (i: number) => Promise<T | undefined>): Promise<T[]> {
  const failures: T[] = [];
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      const f = await run(i);
      if (f !== undefined) failures.push(f);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, count) }, lane));
  return failures;
}

/** Splits a buffer into 1-4 chunks at random points. */
export function split(buf: Buffer, rnd: () => number): Buffer[] {
  if (buf.length < 2 || rnd() < 0.5) return [buf];
  const n = 1 + Math.floor(rnd() * 3);
  const cuts = Array.from({ length: n }, () => 1 + Math.floor(rnd() * (buf.length - 1))).sort((a, b) => a - b);
  const out: Buffer[] = [];
  let at = 0;
  for (const c of cuts) {
    if (c > at) out.push(buf.subarray(at, c));
    at = c;
  }
  out.push(buf.subarray(at));
  return out;
}
