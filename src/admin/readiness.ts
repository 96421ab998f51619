// /readyz asks three real questions. The platform one costs a platform call, so its answer is cached for a
// while (a scraper polling /readyz every second must not turn into a GetAppInfo every second); concurrent
// probes share one call.
import type { Readiness } from './deps.ts';

export interface ReadinessOptions {
  /** One cheap platform call that succeeds only when the platform answers (GetAppInfo). */
  probePlatform: () => Promise<unknown>;
  /** Resolves when the store answers a read; rejects (or resolves false) when it is closed or broken. */
  probeStore: () => Promise<unknown>;
  /** Are the proxy listeners bound and accepting? */
  listenersUp: () => boolean;
  /** How long a platform answer (good or bad) is reused; default 10 000 ms. */
  platformCacheMs?: number;
  now?: () => number;
}

export function createReadiness(options: ReadinessOptions): () => Promise<Readiness> {
  const now = options.now ?? Date.now;
  const cacheMs = options.platformCacheMs ?? 10_000;
  let cached: { ok: boolean; at: number } | undefined;
  let inflight: Promise<boolean> | undefined;

  const platform = (): Promise<boolean> => {
    if (cached && now() - cached.at < cacheMs) return Promise.resolve(cached.ok);
    inflight ??= options
      .probePlatform()
      .then(
        () => true,
        () => false,
      )
      .then((ok) => {
        cached = { ok, at: now() };
        inflight = undefined;
        return ok;
      });
    return inflight;
  };
  const store = (): Promise<boolean> =>
    options.probeStore().then(
      (v) => v !== false,
      () => false,
    );

  return async () => {
    const [p, s] = await Promise.all([platform(), store()]);
    let listeners = false;
    try {
      listeners = options.listenersUp();
    } catch {
      listeners = false;
    }
    return { platform: p, store: s, listeners };
  };
}
