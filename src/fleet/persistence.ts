// Whether the fleet's shared store keeps its data across a restart, read once at start. Without it a restart
// empties the store: the daemons put back what they hold (users, sticky sessions; usage through the allowance),
// but orders, the merchant-number journal, callbacks and events are gone, so the daemon says so once. A
// managed Redis often refuses CONFIG (renamed, or an ACL): that is not an error, only a check not made.
import type { FleetState, Persistence } from '../store/fleet-state.ts';
import type { Logger } from '../telemetry/logger.ts';

export type { Persistence } from '../store/fleet-state.ts';

/** Reads the settings and logs one line: a warning when the store keeps nothing on disk. */
export async function checkPersistence(
  state: Pick<FleetState, 'persistence'>,
  logger: Logger | undefined,
): Promise<Persistence | undefined> {
  const p = await state.persistence();
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
