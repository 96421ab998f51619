// How `rotor start` lives under a service manager: SIGINT/SIGTERM drain and stop the daemon, SIGHUP reloads the
// configuration file (read off the event loop; an invalid file is refused and the running config kept;
// src/daemon/reload.ts says how the rest of a reload goes).
import { reloadConfig } from '../config/index.ts';
import type { Logger } from '../telemetry/logger.ts';
import { ReloadIncompleteError } from './reload.ts';
import type { Daemon } from './types.ts';

/** Resolves once a signal has stopped the daemon (after draining for `drainMs`). */
export function runUntilSignalled(daemon: Daemon, drainMs: number, logger: Logger, configFile?: string): Promise<void> {
  return new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down: draining connections');
      daemon.close(drainMs).then(resolve, (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        resolve();
      });
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
    // One reload at a time; SIGHUPs that arrive meanwhile are folded into one more, which reads the file again:
    // the file as it is after the last signal is the one in force.
    let reloading = false;
    let again = false;
    const reload = async (): Promise<void> => {
      reloading = true;
      do {
        again = false;
        try {
          const next = await reloadConfig(configFile ? { file: configFile } : {});
          await daemon.reload(next);
        } catch (err) {
          if (err instanceof ReloadIncompleteError) logger.error({ err }, err.message);
          else logger.error({ err }, 'reload refused; the running configuration is kept');
        }
      } while (again && !stopping);
      reloading = false;
    };
    process.on('SIGHUP', () => {
      if (reloading) again = true;
      else void reload();
    });
  });
}
