// The second line behind the body-pattern guard (request-rules-pattern.ts): a request rule's body patterns are
// matched on a thread of their own, never on the event loop, under a deadline. The guard bounds the ways a
// pattern can match at one place, not the length each way walks: a pattern it accepts can still take a second on
// a 64 KiB page built for it (`(?:a…400 a…){0,127}b` on 64 KiB of "a": 1.1 s measured), and on the event loop that
// second is every other customer's too. Here one worker thread runs one response's patterns at a time, in the
// rules' order (the first that matches wins), and answers by message; a response whose patterns are not through
// within `deadlineMs` has its worker terminated (V8 stops the regular expression where it is; the next response
// gets a new thread) and is answered "stopped at pattern i", the index the worker published in shared memory as
// it began that pattern, so the rule's own `bodyTimeout` decides (request-rules.ts judgeBody). Responses wait
// their turn per owner (the customer whose rules they are), the owners served in turn: one customer's many
// hostile pages (at most one per client connection, http-lane.ts) delay another customer's response by at most
// one deadline per customer waiting, not one per page. Only responses a body rule may fire come here; the thread
// starts with the first of them.
import { Worker } from 'node:worker_threads';

/** How long one response's body patterns may run before they are stopped. */
export const BODY_MATCH_DEADLINE_MS = 100;

/** The worker's code (CommonJS, evaluated: no file to resolve from src/ or dist/). */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
// [0]: the pattern being matched, [1]: the job it belongs to
const progress = new Int32Array(workerData.progress);
const compiled = new Map();
function compile(source) {
  let re = compiled.get(source);
  if (re === undefined) {
    if (compiled.size >= 1000) compiled.clear();
    re = new RegExp(source, 'i');
    compiled.set(source, re);
  }
  return re;
}
parentPort.on('message', (job) => {
  const body = Buffer.from(job.body.buffer, job.body.byteOffset, job.body.byteLength);
  let text = '';
  let textBytes = -1;
  let found = -1;
  for (let i = 0; i < job.patterns.length; i++) {
    Atomics.store(progress, 1, job.id);
    Atomics.store(progress, 0, i);
    const n = Math.min(body.length, job.bytes[i]);
    if (n !== textBytes) {
      text = body.toString('utf8', 0, n);
      textBytes = n;
    }
    if (compile(job.patterns[i]).test(text)) {
      found = i;
      break;
    }
  }
  parentPort.postMessage({ id: job.id, found });
});
`;

/**
 * A response's outcome: the index of the first pattern that matched (-1: none), or, when the deadline stopped
 * the match, `stoppedAt`: the index of the pattern that was running (the ones before it did not match).
 */
export type BodyMatchDone = (found: number, stoppedAt: number | undefined) => void;

interface Job {
  id: number;
  body: Buffer;
  patterns: readonly string[];
  bytes: readonly number[];
  done: BodyMatchDone;
}

export interface BodyMatcherOptions {
  deadlineMs?: number;
}

export class BodyMatcher {
  private readonly deadlineMs: number;
  private worker: Worker | undefined;
  private progress: Int32Array | undefined;
  /** The thread has begun running (its start-up, tens of ms, is not counted against a response's deadline). */
  private online = false;
  private running: Job | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Waiting their turn, per owner (one response per client connection with a body rule in play). */
  private readonly queues = new Map<object, Job[]>();
  /** Owners with responses waiting, in the order they are served (round robin). */
  private turns: object[] = [];
  private nextId = 1;
  private closed = false;
  /** Responses whose patterns the deadline stopped (tests read it). */
  stopped = 0;
  /** Worker threads started so far. */
  started = 0;

  constructor(options: BodyMatcherOptions = {}) {
    this.deadlineMs = options.deadlineMs ?? BODY_MATCH_DEADLINE_MS;
  }

  /**
   * Matches `patterns` (sources a rule compiled, case-insensitive), each against the first `bytes[i]` bytes of
   * `body` as UTF-8, in order; `done` is called once, later (never synchronously).
   */
  match(body: Buffer, patterns: readonly string[], bytes: readonly number[], done: BodyMatchDone, owner: object = this): void {
    if (this.closed) {
      queueMicrotask(() => done(-1, 0));
      return;
    }
    const job = { id: this.nextId++, body, patterns, bytes, done };
    const queue = this.queues.get(owner);
    if (queue === undefined) {
      this.queues.set(owner, [job]);
      this.turns.push(owner);
    } else queue.push(job);
    if (this.running === undefined) this.next();
  }

  /** The next owner's oldest response (owners in turn). */
  private take(): Job | undefined {
    const owner = this.turns.shift();
    if (owner === undefined) return undefined;
    const queue = this.queues.get(owner)!;
    const job = queue.shift()!;
    if (queue.length === 0) this.queues.delete(owner);
    else this.turns.push(owner);
    return job;
  }

  /** Ends the thread; responses still waiting are answered as stopped at their first pattern. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    const waiting = this.running ? [this.running] : [];
    for (const queue of this.queues.values()) waiting.push(...queue);
    this.running = undefined;
    this.queues.clear();
    this.turns = [];
    void this.worker?.terminate();
    this.worker = undefined;
    for (const job of waiting) job.done(-1, 0);
  }

  private next(): void {
    // A `done` callback may have queued (and so started) the next response already.
    if (this.running !== undefined) return;
    const job = this.take();
    if (job === undefined) {
      this.worker?.unref();
      return;
    }
    this.running = job;
    let longest = 0;
    for (const n of job.bytes) if (n > longest) longest = n;
    // A copy of only the bytes the patterns see, its memory moved to the thread (no second copy there).
    const length = Math.min(job.body.length, longest);
    const copy = new Uint8Array(length);
    copy.set(job.body.subarray(0, length));
    const worker = this.thread();
    // Held while a response waits on it; idle, it never keeps the process alive.
    worker.ref();
    worker.postMessage({ id: job.id, body: copy, patterns: job.patterns, bytes: job.bytes }, [copy.buffer]);
    if (this.online) this.arm(job);
  }

  private arm(job: Job): void {
    this.timer = setTimeout(() => this.stop(job), this.deadlineMs);
  }

  private thread(): Worker {
    if (this.worker !== undefined) return this.worker;
    const shared = new SharedArrayBuffer(8);
    this.progress = new Int32Array(shared);
    // Nothing of the parent's loaders (tsx in tests: its hooks would keep the idle thread's port alive).
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      execArgv: [],
      workerData: { progress: shared },
      // A pattern's backtracking or a page's text cannot grow the thread past this (it then ends: lost() below).
      resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 },
    });
    this.started++;
    this.online = false;
    worker.once('online', () => {
      if (worker !== this.worker) return;
      this.online = true;
      if (this.running !== undefined) this.arm(this.running);
    });
    worker.on('message', (m: { id: number; found: number }) => this.answered(worker, m));
    // A thread that fails or ends by itself: the response it ran is answered as stopped.
    worker.on('error', () => this.lost(worker));
    worker.on('exit', () => this.lost(worker));
    this.worker = worker;
    return worker;
  }

  private answered(worker: Worker, m: { id: number; found: number }): void {
    const job = this.running;
    if (worker !== this.worker || job === undefined || m.id !== job.id) return;
    clearTimeout(this.timer);
    this.running = undefined;
    job.done(m.found, undefined);
    this.next();
  }

  /** The deadline: the thread is ended where it is; the response is answered with the pattern it was on. */
  private stop(job: Job): void {
    if (this.running !== job) return;
    const progress = this.progress!;
    const at = Atomics.load(progress, 1) === job.id ? Atomics.load(progress, 0) : 0;
    const worker = this.worker;
    this.worker = undefined;
    this.running = undefined;
    void worker?.terminate();
    this.stopped++;
    job.done(-1, at);
    this.next();
  }

  private lost(worker: Worker): void {
    if (worker !== this.worker) return;
    this.worker = undefined;
    const job = this.running;
    if (job === undefined) return;
    clearTimeout(this.timer);
    this.stop(job);
  }
}
