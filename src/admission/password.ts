// Proxy passwords at rest: scrypt (node:crypto), `scrypt$<N>$<r>$<p>$<salt b64>$<hash b64>`, so the cost can
// be raised later and old hashes still verify. A hash costs ~40-60 ms of CPU at N=2^14, so it never runs on
// the event loop: every hash and verification goes through one process-wide queue onto threads of its own
// at a lower CPU priority (src/admission/hash-threads.ts; not libuv's pool, whose 4 threads dns.lookup and fs
// need), at most `concurrency` at once, the proxy's logins first, then admin writes, then bulk imports and the
// portal's sign-ins taking turns (neither waits for the whole of the other: a customer signing in during an
// import waits for about one hash, an import during a flood of sign-ins goes at half speed). The proxy's logins and
// the portal's sign-ins (both anyone who reaches a listener can send) waiting beyond `maxQueued` each are shed at
// once (HashBusyError): a flood costs the queue's bound, never an unbounded backlog, and never holds an admin write.
// The users' table remembers a verified password's SHA-256 in memory (users.ts), so each user pays the hash
// once per process. A password Rotor generated costs no scrypt at all (the end of this file).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { RotorError } from '../errors/rotor-error.ts';
import { HashThreads } from './hash-threads.ts';

const N = 16_384;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;
const MAXMEM = 64 * 1024 * 1024;
/** The memory a verification may take (scrypt needs about 128 × N × r bytes). */
const VERIFY_MAXMEM = 256 * 1024 * 1024;
/**
 * The most work an imported hash may ask per check, N × r × p: 16 times Rotor's own (2^14 × 8 × 1), and within
 * VERIFY_MAXMEM. Heavier parameters cost seconds of a hashing thread per wrong guess (two threads serve every
 * login), or could never be checked at all (past the memory bound every check failed).
 */
const MAX_IMPORTED_WORK = 2 ** 21;

/**
 * login: the proxy's logins; admin: the admin API's writes (and the config's users); bulk: batch imports;
 * portal: the customer portal's sign-ins and password changes (anonymous traffic: after every admin write, in turn
 * with bulk imports).
 */
export type HashPriority = 'login' | 'admin' | 'bulk' | 'portal';

/** A login's (or portal sign-in's) verification refused before hashing: the queue of waiting verifications is full. */
export class HashBusyError extends RotorError {
  constructor() {
    super('AUTH_BUSY', 'too many password checks waiting; try again shortly', { httpStatus: 503 });
  }
}

export interface HashingSettings {
  /** scrypt computations running at once (each on a thread of its own). */
  concurrency: number;
  /** Verifications waiting at most, for the proxy's logins and for the portal's sign-ins each; beyond, refused at once. */
  maxQueued: number;
  /** Linux nice value of the hashing threads (0 = the process's; default HASH_NICE). */
  nice?: number;
}

/** How much lower than the event loop the hashes run by default (Linux nice; 19 is the lowest). */
export const HASH_NICE = 10;

/** One bounded, prioritized queue in front of the hashing threads. */
export class HashQueue {
  private running = 0;
  private readonly waiting: Record<HashPriority, (() => void)[]> = { login: [], admin: [], bulk: [], portal: [] };
  private readonly heads: Record<HashPriority, number> = { login: 0, admin: 0, bulk: 0, portal: 0 };
  /** Which of bulk and portal was taken last (they take turns). */
  private lastShared: HashPriority = 'portal';

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
      SHED.has(priority) &&
      this.running >= this.settings.concurrency &&
      this.waiting[priority].length - this.heads[priority] >= this.settings.maxQueued
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
    for (const p of FIRST) {
      if (this.heads[p] < this.waiting[p].length) return this.pop(p);
    }
    // Bulk imports and the portal's sign-ins in turn.
    for (const p of this.lastShared === 'bulk' ? PORTAL_FIRST : BULK_FIRST) {
      if (this.heads[p] < this.waiting[p].length) {
        this.lastShared = p;
        return this.pop(p);
      }
    }
    return undefined;
  }

  private pop(p: HashPriority): () => void {
    const q = this.waiting[p];
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

const PRIORITIES: readonly HashPriority[] = ['login', 'admin', 'bulk', 'portal'];
/** Taken strictly first, in this order; then bulk and portal in turn. */
const FIRST: readonly HashPriority[] = ['login', 'admin'];
const BULK_FIRST: readonly HashPriority[] = ['bulk', 'portal'];
const PORTAL_FIRST: readonly HashPriority[] = ['portal', 'bulk'];
/** The priorities anyone reaching a listener can fill: bounded by maxQueued each, shed beyond. */
const SHED: ReadonlySet<HashPriority> = new Set(['login', 'portal']);

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
  // Past the check's memory bound scrypt throws: such a hash is as good as malformed (the dummy's work is done).
  if (128 * n * r > VERIFY_MAXMEM) return undefined;
  const expected = Buffer.from(parts[5]!, 'base64');
  if (expected.length === 0) return undefined;
  return { n, r, p, salt: Buffer.from(parts[4]!, 'base64'), expected };
}

/**
 * True when `password` is the one `stored` was made from, checked on a hashing thread through the bounded queue. A login (the default priority) may be refused
 * with HashBusyError when too many wait. A malformed hash costs the same work as a real one (the dummy's).
 */
export async function verifyPasswordAsync(password: string, stored: string, priority: HashPriority = 'login'): Promise<boolean> {
  // A generated password (SHA-256, below) is checked at once; a wrong one still costs the
  // dummy's scrypt, so its answer takes what an unknown name's takes.
  if (isGeneratedHash(stored) && verifyGeneratedPassword(password, stored)) return true;
  const h = isGeneratedHash(stored) ? undefined : parse(stored);
  const work = h ?? parse(DUMMY_HASH)!;
  const key = await hashQueue.run(priority, () =>
    scryptAsync(password, work.salt, work.expected.length, work.n, work.r, work.p, VERIFY_MAXMEM),
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

// ── passwords that cost no scrypt ──
// Stored forms of a password that cost no scrypt:
// - a password Rotor generated itself (generatePassword: 18 random bytes, 144 bits) is stored as
//   `sha256$<salt b64>$<SHA-256(salt ‖ password) b64>`. A slow hash protects guessable, human passwords
//   against a stolen store; nobody can search 2^144 candidates, fast hash or not (the same reasoning as API
//   tokens kept as their SHA-256). This is what lets an import of 100,000 customers with generated
//   passwords finish in seconds instead of the ~40 minutes their scrypt would take on two cores.
//   A password a client chose is always scrypt (above).
// - an import may carry `passwordHash`: an scrypt hash in Rotor's own format (another Rotor's store, a
//   migration), checked here for shape and cost before it is stored.

const PREFIX = 'sha256$';

/** The stored form of a password Rotor generated (generatePassword); never for a chosen password. */
export function hashGeneratedPassword(password: string, salt: Buffer = randomBytes(16)): string {
  const digest = createHash('sha256').update(salt).update(password, 'utf8').digest();
  return `${PREFIX}${salt.toString('base64')}$${digest.toString('base64')}`;
}

export function isGeneratedHash(stored: string): boolean {
  return stored.startsWith(PREFIX);
}

/** True when `password` is the one a `sha256$` hash was made from; false for any malformed hash. */
export function verifyGeneratedPassword(password: string, stored: string): boolean {
  const parts = stored.split('$');
  if (parts.length !== 3 || parts[0] !== 'sha256') return false;
  const salt = Buffer.from(parts[1]!, 'base64');
  const expected = Buffer.from(parts[2]!, 'base64');
  if (salt.length < 8 || expected.length !== 32) return false;
  const digest = createHash('sha256').update(salt).update(password, 'utf8').digest();
  return timingSafeEqual(digest, expected);
}

const SCRYPT_HASH = /^scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9+/]{16,88}={0,2})\$([A-Za-z0-9+/]{43,88}={0,2})$/;

/**
 * Why an imported `passwordHash` is refused, or undefined when it is an scrypt hash Rotor can verify: N a
 * power of two from 2^14 (no weaker than Rotor's own) to 2^20, r 1–32, p 1–16, N × r × p at most 2^21
 * (MAX_IMPORTED_WORK), salt ≥ 12 bytes, key ≥ 32.
 */
export function importedHashProblem(hash: string): string | undefined {
  const m = SCRYPT_HASH.exec(hash);
  if (!m) return 'must be an scrypt hash as Rotor stores it: scrypt$<N>$<r>$<p>$<salt base64>$<key base64>';
  const [n, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (n < 16_384 || n > 1 << 20 || (n & (n - 1)) !== 0) return 'N must be a power of two from 16384 to 1048576';
  if (r < 1 || r > 32 || p < 1 || p > 16) return 'r must be 1-32 and p 1-16';
  if (n * r * p > MAX_IMPORTED_WORK)
    return `N × r × p must be at most ${MAX_IMPORTED_WORK} (16 times Rotor's own cost per check, whose memory is bounded to 256 MiB)`;
  if (Buffer.from(m[4]!, 'base64').length < 12) return 'the salt must be at least 12 bytes';
  if (Buffer.from(m[5]!, 'base64').length < 32) return 'the key must be at least 32 bytes';
  return undefined;
}
