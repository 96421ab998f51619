// Polling for a condition in tests that cannot be told directly when something has happened.

/** Resolves with the first truthy value of `probe`, polled every `everyMs`; throws after `timeoutMs`. */
export async function waitFor<T>(
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  timeoutMs = 5000,
  what = 'condition',
  everyMs = 15,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
