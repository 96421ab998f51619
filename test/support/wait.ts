// Polling for a condition in tests that cannot be told directly when something has happened: the one polling
// helper of the suite (`poll`). The older entry points (waitFor here, the harnesses' waitFor, `eventually`)
// are thin adapters over it, kept so every test reads the same loop.

export interface PollOptions<T> {
  /** Named in the timeout error. */
  what?: string;
  timeoutMs?: number;
  everyMs?: number;
  /** A probe that throws counts as "not yet" (its last error is in the timeout message); else it rejects. */
  ignoreErrors?: boolean;
  /** Whether a value means done; default anything but undefined, null and false. */
  done?: (value: T | undefined | null | false) => boolean;
}

const settled = (v: unknown): boolean => v !== undefined && v !== null && v !== false;

/** Resolves with the first value of `probe` that is done, polled every `everyMs`; rejects after `timeoutMs`. */
export async function poll<T>(
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: PollOptions<T> = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const everyMs = options.everyMs ?? 15;
  const done = options.done ?? settled;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (done(v)) return v as T;
    } catch (err) {
      if (!options.ignoreErrors) throw err;
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${options.what ?? 'condition'}${lastError ? `: ${String(lastError)}` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Resolves with the first truthy value of `probe`, polled every `everyMs`; throws after `timeoutMs`. */
export function waitFor<T>(
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  timeoutMs = 5000,
  what = 'condition',
  everyMs = 15,
): Promise<T> {
  return poll(probe, { timeoutMs, what, everyMs, done: Boolean });
}

/** Whether `check` came to hold within `ms` (never rejects). */
export function eventually(check: () => boolean | Promise<boolean>, ms: number, everyMs = 25): Promise<boolean> {
  return poll(check, { timeoutMs: ms, everyMs }).then(
    () => true,
    () => false,
  );
}
