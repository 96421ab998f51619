// Whether the fleet's Redis keeps its data across a restart (RDB snapshots `save`, or the append-only file),
// read once at start with CONFIG GET. Without either a restart empties it: the daemons put back what they
// hold (src/fleet/rebuild.ts: users, sticky sessions; usage through the allowance), but orders, the merchant-
// number journal, callbacks and events are gone, so the daemon says so once. A managed Redis often refuses
// CONFIG (renamed, or an ACL): that is not an error, only a check not made.
import type { RedisConnection } from '../store/redis-connection.ts';
import type { Logger } from '../telemetry/logger.ts';

export interface Persistence {
  /** RDB snapshots configured (`save` not empty). */
  snapshots: boolean;
  appendOnly: boolean;
}

/** The Redis's persistence settings; undefined when it refuses CONFIG GET (or cannot be asked). */
export async function readPersistence(connection: RedisConnection): Promise<Persistence | undefined> {
  try {
    const [save, aof] = await connection.run('persistence check', (c) =>
      Promise.all([c.config('GET', 'save') as Promise<string[]>, c.config('GET', 'appendonly') as Promise<string[]>]),
    );
    return { snapshots: (save[1] ?? '').trim() !== '', appendOnly: (aof[1] ?? '').toLowerCase() === 'yes' };
  } catch {
    return undefined;
  }
}

/** Reads the settings and logs one line: a warning when Redis keeps nothing on disk. */
export async function checkPersistence(connection: RedisConnection, logger: Logger | undefined): Promise<Persistence | undefined> {
  const p = await readPersistence(connection);
  if (p === undefined) {
    logger?.info(
      'could not read the redis persistence settings (CONFIG GET refused); make sure redis keeps its data across a restart (appendonly yes)',
    );
  } else if (!p.snapshots && !p.appendOnly) {
    logger?.warn(
      'redis has persistence off (save "" and appendonly no): a restart empties it. The daemons put users, usage and sticky ' +
        'sessions back from what they hold, but orders, the merchant-number journal, callbacks and events are lost: set appendonly yes',
    );
  }
  return p;
}
