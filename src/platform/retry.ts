// Retry policy of the platform client: capped exponential backoff with jitter (p-retry does the waiting).
// The caller's function must resend the identical request (same reqId, same ciphertext): seed part 5.
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
}

/** Runs `attempt` until it succeeds, fails with a non-retryable error, or the retries are spent. */
export function withRetries<T>(attempt: (attemptNumber: number) => Promise<T>, policy: RetryPolicy): Promise<T> {
  return pRetry(attempt, {
    retries: policy.retries,
    factor: 2,
    minTimeout: policy.backoff.baseMs,
    maxTimeout: policy.backoff.maxMs,
    randomize: true,
    signal: policy.signal,
    shouldRetry: ({ error, attemptNumber }) => {
      const again = isRetryable(error);
      if (again) policy.onRetry?.(error, attemptNumber);
      return again;
    },
  });
}
