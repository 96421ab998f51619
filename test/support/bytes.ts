// Serving a large body from the loopback targets of the tests and the bench.
import type { ServerResponse } from 'node:http';

/**
 * Writes `count` bytes to `res` in writes of `piece` (or a slice of it for the tail), waiting for 'drain'
 * whenever the reader is slower than the writes, then ends the response. One buffer serves every write.
 */
export function writeBytes(res: ServerResponse, count: number, piece: Buffer): void {
  let left = count;
  const pump = (): void => {
    while (left > 0) {
      const n = Math.min(left, piece.length);
      left -= n;
      if (!res.write(n === piece.length ? piece : piece.subarray(0, n))) {
        res.once('drain', pump);
        return;
      }
    }
    res.end();
  };
  pump();
}
