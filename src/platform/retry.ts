// Retry policy of the platform client: capped exponential backoff with jitter (p-retry does the waiting).
// The caller's function must resend the identical request (same reqId, same ciphertext): seed part 5.
// The first attempt runs on its own: a call that succeeds at once (nearly all of them; an import of 100,000
// users makes ~133,000) costs no retry machinery. Only a failed first attempt enters p-retry, which sees it
// as its own first attempt (same delays, same onRetry, same abort handling as before).
import pRetry from 'p-retry';
import { isRetryable } from './errors.ts';

export interface Backoff {
  /** Delay before the first retry; later delays double, each multiplied by a random factor in [1, 2). */
  baseMs: number;
  /** Cap on any single delay. */
  maxMs: number;
}

export const DEFAULT_BACKOFF: Backoff = { baseMs: 200, maxMs: 5_000 };

export interface RetryPolicy {
  retries: number;
  backoff: Backoff;
  signal?: AbortSignal | undefined;
  /** Called after a failed attempt that will be retried. */
  onRetry?: (error: Error, attempt: number) => void;
  /** Which failures are retried; default isRetryable (errors.ts). */
  retryable?: (error: unknown) => boolean;
}

/** Runs `attempt` until it succeeds, fails with a non-retryable error, or the retries are spent. */
export async function withRetries<T>(attempt: (attemptNumber: number) => Promise<T>, policy: RetryPolicy): Promise<T> {
  policy.signal?.throwIfAborted();
  const retryable = policy.retryable ?? isRetryable;
  let first: unknown;
  try {
    return await attempt(1);
  } catch (err) {
    if (policy.retries <= 0 || !retryable(err)) throw err;
    first = err;
  }
  return pRetry((n) => (n === 1 ? Promise.reject(first as Error) : attempt(n)), {
    retries: policy.retries,
    factor: 2,
    minTimeout: policy.backoff.baseMs,
    maxTimeout: policy.backoff.maxMs,
    randomize: true,
    signal: policy.signal,
    shouldRetry: ({ error, attemptNumber }) => {
      const again = retryable(error);
      if (again) policy.onRetry?.(error, attemptNumber);
      return again;
    },
  });
}
