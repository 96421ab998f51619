// The sandbox's reading of seed part 5's reqId ("unique per request; on a retry after failure or timeout, keep
// the same value"): a request that arrives again under a reqId already handled, with the same operation and
// the same params, is a retry and is answered with the first answer without being processed again — so a
// retried call whose reply was lost (a traffic return, which has no merchant number) does not act twice. The
// same reqId with other params is a new request (handled, not remembered). A retry that arrives while the first
// is still being handled waits for its answer. Only answers of handled calls are remembered (success or a
// refusal); the failure knob's 500 and the "too many at once" answer did nothing and are not.
//
// Bounded: the last `max` reqIds, each for `ttlMs` (real time: a client's retries come within seconds). A handled
// answer is also handed to `durable` (the sandbox's state: state.ts rememberReply, written with the state file by
// persist.ts, in the same turn as the change it answers), asked when memory has no entry: after a restart of the
// sandbox a retry is still answered, not processed again.
// The server asks it only for operations that change something and carry no merchant number: reads answer the
// current state, and a duplicate merchant number gets what the seed says (the existing order or change state).

export interface Remembered<T> {
  /** operation name + '\n' + the params ciphertext as sent */
  request: string;
  answer: Promise<T>;
  at: number;
}

/** Answers kept beyond this object's memory (the sandbox's state file). */
export interface DurableReplies<T> {
  /** The kept answer of this reqId when it was for the same request and is still fresh. */
  find(reqId: string, request: string): T | undefined;
  keep(reqId: string, request: string, answer: T): void;
}

export class Replays<T> {
  private readonly entries = new Map<string, Remembered<T>>();
  /** Retries answered from memory (tests and /sim/calls read it). */
  replayed = 0;

  private readonly max: number;
  private readonly ttlMs: number;
  private readonly now: () => number;
  private readonly enabled: () => boolean;
  private readonly durable: DurableReplies<T> | undefined;

  constructor(
    options: {
      max?: number;
      ttlMs?: number;
      now?: () => number;
      /** Read per call: false = every request is handled (a platform that does not recognise retried reqIds). */
      enabled?: () => boolean;
      durable?: DurableReplies<T>;
    } = {},
  ) {
    this.max = options.max ?? 10_000;
    this.ttlMs = options.ttlMs ?? 10 * 60_000;
    this.now = options.now ?? (() => performance.now());
    this.enabled = options.enabled ?? (() => true);
    this.durable = options.durable;
  }

  /**
   * The remembered answer of this reqId when `request` is the same, else runs `handle` and remembers its
   * answer while `keep(answer)` says so. An empty reqId is never remembered.
   */
  async answer(reqId: string, request: string, handle: () => Promise<T>, keep: (answer: T) => boolean): Promise<T> {
    if (reqId === '' || !this.enabled()) return handle();
    const now = this.now();
    const hit = this.entries.get(reqId);
    if (hit !== undefined && now - hit.at < this.ttlMs) {
      if (hit.request === request) {
        this.replayed += 1;
        return hit.answer;
      }
      return handle();
    }
    if (hit !== undefined) this.entries.delete(reqId);
    else {
      const kept = this.durable?.find(reqId, request);
      if (kept !== undefined) {
        this.replayed += 1;
        return kept;
      }
    }
    const answer = handle();
    const entry: Remembered<T> = { request, answer, at: now };
    this.entries.set(reqId, entry);
    this.trim(now);
    try {
      const value = await answer;
      // In the turn the handler's change was made (microtasks only since): a state write has both or neither.
      if (keep(value)) this.durable?.keep(reqId, request, value);
      else if (this.entries.get(reqId) === entry) this.entries.delete(reqId);
      return value;
    } catch (err) {
      if (this.entries.get(reqId) === entry) this.entries.delete(reqId);
      throw err;
    }
  }

  get size(): number {
    return this.entries.size;
  }

  private trim(now: number): void {
    for (const [reqId, e] of this.entries) {
      if (this.entries.size <= this.max && now - e.at < this.ttlMs) break;
      this.entries.delete(reqId);
    }
  }
}
