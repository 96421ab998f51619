// One process per SQLite store. Two daemons on one file (a second `rotor start` with other ports, a service
// restarted while the old process lingers) would each enforce a customer's quota from their own counters, and
// in embedded mode each would write its own sandbox state over the other's. The lock is an exclusive SQLite
// lock on `<store>.lock`, held for the process's life: the kernel drops it when the process dies, so a
// killed daemon leaves nothing stale behind. Redis stores are shared by design (a fleet) and take no lock.
import { mkdirSync, realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { StoreInUseError, StoreUnavailableError } from './errors.ts';
import { isRedisUrl } from './open.ts';

export interface StoreLock {
  readonly file: string;
  release(): void;
}

// POSIX locks do not keep a process from itself: a second holder in this process is refused here.
const heldHere = new Set<string>();

/** The lock file of a SQLite `store.path`; undefined for Redis and in-memory stores, which take none. */
export function storeLockFile(path: string): string | undefined {
  if (path === ':memory:' || path === '' || path.startsWith('file:') || isRedisUrl(path)) return undefined;
  return `${canonical(path)}.lock`;
}

// The file itself, not the name it was given: a store.path through a symlink (a deploy's `current.db`, a linked
// directory) locks the same file as its target's own name.
function canonical(path: string): string {
  const abs = resolve(path);
  try {
    return realpathSync(abs);
  } catch {
    // Not made yet: its directory may still be a link.
  }
  try {
    return join(realpathSync(dirname(abs)), basename(abs));
  } catch {
    return abs;
  }
}

/**
 * Takes the store's lock, or throws StoreInUseError when another process (or another holder here) has it.
 * `holder` says who asks ("rotor start", "rotor users import --store"), for the refusal's message.
 */
export function lockStore(path: string, holder: string): StoreLock | undefined {
  const file = storeLockFile(path);
  if (file === undefined) return undefined;
  const refuse = (): never => {
    throw new StoreInUseError(
      `store ${path} is in use by another process (its lock ${file} is held; fuser on it names the process): stop the other daemon, or give this one its own store.path; ${holder} needs the store to itself`,
    );
  };
  if (heldHere.has(file)) refuse();
  let db: Database.Database | undefined;
  try {
    mkdirSync(dirname(file), { recursive: true });
    db = new Database(file, { timeout: 0 });
    // Exclusive mode keeps the lock of the first write until the connection closes.
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL, since INTEGER NOT NULL)');
    db.exec('DELETE FROM holder');
    db.prepare('INSERT INTO holder (pid, since) VALUES (?, ?)').run(process.pid, Date.now());
    db.exec('COMMIT');
  } catch (err) {
    db?.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') refuse();
    throw new StoreUnavailableError(`cannot lock store at ${path} (${file}): ${(err as Error).message}`, { cause: err });
  }
  heldHere.add(file);
  const held = db;
  return {
    file,
    release() {
      if (!heldHere.delete(file)) return;
      held.close();
    },
  };
}
