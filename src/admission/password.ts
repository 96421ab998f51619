// Proxy passwords at rest: scrypt (node:crypto), `scrypt$<N>$<r>$<p>$<salt b64>$<hash b64>`, so the cost can
// be raised later and old hashes still verify. A hash costs ~40-60 ms of CPU at N=2^14, so it never runs on
// the event loop: every hash and verification goes through one process-wide queue onto threads of its own
// at a lower CPU priority (src/admission/hash-threads.ts; not libuv's pool, whose 4 threads dns.lookup and fs
// need), at most `concurrency` at once, logins first, then admin writes, then bulk imports. Logins waiting beyond
// `maxQueued` are shed at once (HashBusyError): a flood costs the queue's bound, never an unbounded backlog.
// The directory remembers a verified password's SHA-256 in memory (src/users/directory.ts), so each user
// pays the hash once per process.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { RotorError } from '../errors/rotor-error.ts';
import { HashThreads } from './hash-threads.ts';
import { isGeneratedHash, verifyGeneratedPassword } from './secret-hash.ts';

const N = 16_384;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;
const MAXMEM = 64 * 1024 * 1024;

export type HashPriority = 'login' | 'admin' | 'bulk';

/** A login's verification refused before hashing: the queue of waiting verifications is full. */
export class HashBusyError extends RotorError {
  constructor() {
    super('AUTH_BUSY', 'too many password checks waiting; try again shortly', { httpStatus: 503 });
  }
}

export interface HashingSettings {
  /** scrypt computations running at once (each on a thread of its own). */
  concurrency: number;
  /** Login verifications waiting at most; beyond, refused at once. */
  maxQueued: number;
  /** Linux nice value of the hashing threads (0 = the process's; default HASH_NICE). */
  nice?: number;
}

/** How much lower than the event loop the hashes run by default (Linux nice; 19 is the lowest). */
export const HASH_NICE = 10;

/** One bounded, prioritized queue in front of the hashing threads. */
export class HashQueue {
  private running = 0;
  private readonly waiting: Record<HashPriority, (() => void)[]> = { login: [], admin: [], bulk: [] };
  private readonly heads: Record<HashPriority, number> = { login: 0, admin: 0, bulk: 0 };

  constructor(private settings: HashingSettings) {}

  configure(settings: HashingSettings): void {
    this.settings = { concurrency: Math.max(1, settings.concurrency), maxQueued: Math.max(0, settings.maxQueued) };
    this.pump();
  }

  /** Computations running now and waiting (for tests and the bench). */
  get stats(): { running: number; queued: number } {
    let queued = 0;
    for (const p of PRIORITIES) queued += this.waiting[p].length - this.heads[p];
    return { running: this.running, queued };
  }

  run<T>(priority: HashPriority, work: () => Promise<T>): Promise<T> {
    if (
      priority === 'login' &&
      this.running >= this.settings.concurrency &&
      this.waiting.login.length - this.heads.login >= this.settings.maxQueued
    ) {
      return Promise.reject(new HashBusyError());
    }
    return new Promise<T>((resolve, reject) => {
      const start = (): void => {
        this.running++;
        work()
          .then(resolve, reject)
          .finally(() => {
            this.running--;
            this.pump();
          });
      };
      this.waiting[priority].push(start);
      this.pump();
    });
  }

  private pump(): void {
    while (this.running < this.settings.concurrency) {
      const next = this.take();
      if (!next) return;
      next();
    }
  }

  private take(): (() => void) | undefined {
    for (const p of PRIORITIES) {
      const q = this.waiting[p];
      if (this.heads[p] < q.length) {
        const fn = q[this.heads[p]]!;
        this.heads[p]++;
        // Compact now and then, so a long-lived queue does not keep its consumed head.
        if (this.heads[p] >= 1024 || this.heads[p] === q.length) {
          q.splice(0, this.heads[p]);
          this.heads[p] = 0;
        }
        return fn;
      }
    }
    return undefined;
  }
}

const PRIORITIES: readonly HashPriority[] = ['login', 'admin', 'bulk'];

/** The process's queue (one set of hashing threads per process). */
export const hashQueue = new HashQueue({ concurrency: 2, maxQueued: 64 });

/** The threads the queue's hashes run on (as many as it runs at once). */
const hashThreads = new HashThreads({ size: 2, nice: HASH_NICE, idleMs: 30_000 });

/** Sets the process's hashing bounds (config proxy.auth). */
export function configureHashing(settings: HashingSettings): void {
  hashQueue.configure(settings);
  hashThreads.configure({ size: Math.max(1, settings.concurrency), nice: settings.nice ?? HASH_NICE, idleMs: 30_000 });
}

function scryptAsync(password: string, salt: Buffer, length: number, n: number, r: number, p: number, maxmem: number): Promise<Buffer> {
  return hashThreads.scrypt({ password, salt, length, n, r, p, maxmem });
}

function encode(salt: Buffer, key: Buffer): string {
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** The hash on a hashing thread through the process's bounded queue (default priority 'admin'). */
export async function hashPasswordAsync(password: string, options: { salt?: Buffer; priority?: HashPriority } = {}): Promise<string> {
  const salt = options.salt ?? randomBytes(16);
  const key = await hashQueue.run(options.priority ?? 'admin', () => scryptAsync(password, salt, KEY_LENGTH, N, R, P, MAXMEM));
  return encode(salt, key);
}

interface Parsed {
  n: number;
  r: number;
  p: number;
  salt: Buffer;
  expected: Buffer;
}

function parse(stored: string): Parsed | undefined {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return undefined;
  const [n, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  if (![n, r, p].every((x) => Number.isInteger(x) && x > 0) || n > 1 << 20) return undefined;
  const expected = Buffer.from(parts[5]!, 'base64');
  if (expected.length === 0) return undefined;
  return { n, r, p, salt: Buffer.from(parts[4]!, 'base64'), expected };
}

/**
 * True when `password` is the one `stored` was made from, checked on a hashing thread through the bounded queue. A login (the default priority) may be refused
 * with HashBusyError when too many wait. A malformed hash costs the same work as a real one (the dummy's).
 */
export async function verifyPasswordAsync(password: string, stored: string, priority: HashPriority = 'login'): Promise<boolean> {
  // A generated password (SHA-256, src/admission/secret-hash.ts) is checked at once; a wrong one still costs the
  // dummy's scrypt, so its answer takes what an unknown name's takes.
  if (isGeneratedHash(stored) && verifyGeneratedPassword(password, stored)) return true;
  const h = isGeneratedHash(stored) ? undefined : parse(stored);
  const work = h ?? parse(DUMMY_HASH)!;
  const key = await hashQueue.run(priority, () =>
    scryptAsync(password, work.salt, work.expected.length, work.n, work.r, work.p, 256 * 1024 * 1024),
  );
  return h !== undefined && timingSafeEqual(key, h.expected);
}

/**
 * A hash no password is known to match, with the real cost parameters: an unknown user name is checked
 * against it, so it costs the same scrypt as a known one and the time taken tells nobody which names exist.
 */
export const DUMMY_HASH = encode(randomBytes(16), randomBytes(KEY_LENGTH));

/** A new password: 18 random bytes, base64url (24 characters, safe in a proxy URL). */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}

/** The in-memory fingerprint of a verified password (compared in constant time, never stored). */
export function passwordDigest(password: string): Buffer {
  return createHash('sha256').update(password, 'utf8').digest();
}
