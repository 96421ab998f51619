// Password hashes on threads of their own, at a lower CPU priority than the event loop. On libuv's pool a
// scrypt (~50 ms of CPU) competed as an equal with the event loop for the machine's cores: 1,000 users logging
// in after a restart kept two cores busy and another user's requests waited behind them for a core (p99 over
// 100 ms on 2 cores). Here each hash runs scryptSync in a worker thread whose Linux nice value is raised
// (setpriority on the thread's own id, read from /proc/thread-self), so the scheduler hands the event loop a
// core first and the hashes get the rest: on an idle machine they still run at full speed. The queue in front
// (src/admission/password.ts HashQueue) keeps at most `size` hashes running, so at most `size` threads exist; a
// thread idle for `idleMs` ends (no memory held between bursts) and none keeps the process alive.
import { Worker } from 'node:worker_threads';
import { InternalError } from '../errors/rotor-error.ts';

/** The worker's code (CommonJS, evaluated: no file to resolve from src/ or dist/). */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { scryptSync } = require('node:crypto');
try {
  const tid = Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop());
  // Below the event loop by \`nice\`: a process already run at a nice value (systemd's Nice=) keeps the gap.
  const os = require('node:os');
  if (workerData.nice > 0 && Number.isInteger(tid)) os.setPriority(tid, Math.min(19, os.getPriority(tid) + workerData.nice));
} catch {
  // Not Linux, or not allowed: the hashes run at the process's priority.
}
parentPort.on('message', (job) => {
  try {
    const key = scryptSync(job.password, Buffer.from(job.salt), job.length, { N: job.n, r: job.r, p: job.p, maxmem: job.maxmem });
    parentPort.postMessage({ id: job.id, key });
  } catch (err) {
    parentPort.postMessage({ id: job.id, error: String(err && err.message) });
  }
});
`;

export interface HashThreadSettings {
  /** Threads at most (the queue's concurrency). */
  size: number;
  /** How far below the process's Linux nice value the threads run: 0 (as high) to 19 (capped at nice 19). */
  nice: number;
  /** A thread idle this long ends. */
  idleMs: number;
}

export interface ScryptJob {
  password: string;
  salt: Buffer;
  length: number;
  n: number;
  r: number;
  p: number;
  maxmem: number;
}

interface Pending {
  resolve: (key: Buffer) => void;
  reject: (err: Error) => void;
}

interface Thread {
  worker: Worker;
  /** The id of the job it runs (one at a time), if any. */
  job: number | undefined;
  idleTimer: NodeJS.Timeout | undefined;
}

export class HashThreads {
  private readonly threads: Thread[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(private settings: HashThreadSettings) {}

  configure(settings: HashThreadSettings): void {
    const niceChanged = settings.nice !== this.settings.nice;
    this.settings = settings;
    // Idle threads of the old priority end now; busy ones end when idle.
    if (niceChanged) for (const t of [...this.threads]) if (t.job === undefined) this.end(t);
  }

  /** Threads alive now (for tests). */
  get alive(): number {
    return this.threads.length;
  }

  scrypt(job: ScryptJob): Promise<Buffer> {
    const thread = this.threads.find((t) => t.job === undefined) ?? this.start();
    const id = this.nextId++;
    thread.job = id;
    if (thread.idleTimer) clearTimeout(thread.idleTimer);
    thread.idleTimer = undefined;
    // Referenced while it works: a process waiting for a hash does not exit under it.
    thread.worker.ref();
    return new Promise<Buffer>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      thread.worker.postMessage({ id, ...job });
    });
  }

  private start(): Thread {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      // Nothing of the parent's loaders (tsx in tests): the worker needs node:crypto only.
      execArgv: [],
      workerData: { nice: this.settings.nice },
      resourceLimits: { maxOldGenerationSizeMb: 8, maxYoungGenerationSizeMb: 1 },
    });
    const thread: Thread = { worker, job: undefined, idleTimer: undefined };
    worker.on('message', (m: { id: number; key?: Uint8Array; error?: string }) => {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      this.idle(thread);
      if (!p) return;
      if (m.key) p.resolve(Buffer.from(m.key.buffer, m.key.byteOffset, m.key.byteLength));
      else p.reject(new InternalError(`password hash failed: ${m.error ?? 'unknown error'}`));
    });
    worker.on('error', (err) => this.lost(thread, err));
    worker.on('exit', () => this.lost(thread, new InternalError('password hash thread exited')));
    worker.unref();
    this.threads.push(thread);
    return thread;
  }

  private idle(thread: Thread): void {
    thread.job = undefined;
    thread.worker.unref();
    if (this.threads.length > this.settings.size) return this.end(thread);
    thread.idleTimer = setTimeout(() => this.end(thread), this.settings.idleMs);
    thread.idleTimer.unref();
  }

  private end(thread: Thread): void {
    this.remove(thread);
    void thread.worker.terminate();
  }

  private remove(thread: Thread): void {
    if (thread.idleTimer) clearTimeout(thread.idleTimer);
    const at = this.threads.indexOf(thread);
    if (at >= 0) this.threads.splice(at, 1);
  }

  /** A thread that died fails the job it held, if any. */
  private lost(thread: Thread, err: Error): void {
    this.remove(thread);
    const id = thread.job;
    thread.job = undefined;
    const p = id === undefined ? undefined : this.pending.get(id);
    if (id === undefined || !p) return;
    this.pending.delete(id);
    p.reject(err instanceof InternalError ? err : new InternalError(`password hash thread failed: ${err.message}`, { cause: err }));
  }
}
