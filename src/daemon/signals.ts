// How `rotor start` lives under a service manager: SIGINT/SIGTERM drain and stop the daemon, SIGHUP reloads the
// configuration file (read off the event loop; an invalid file is refused and the running config kept;
// src/daemon/reload.ts says how the rest of a reload goes).
import { reloadConfig } from '../config/index.ts';
import type { Logger } from '../telemetry/logger.ts';
import { ReloadIncompleteError } from './reload.ts';
import type { Daemon } from './types.ts';

/** How long an uncaught error's stop may take before the process exits regardless. */
export const FATAL_STOP_MS = 10_000;

/**
 * Resolves once a signal has stopped the daemon (after draining for `drainMs`): true; false when an uncaught
 * error stopped it (the process should exit non-zero).
 */
export function runUntilSignalled(daemon: Daemon, drainMs: number, logger: Logger, configFile?: string): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    let stopping = false;
    let clean = true;
    const stop = (signal: string, ms: number): void => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down: draining connections');
      daemon.close(ms).then(
        () => resolve(clean),
        (err: unknown) => {
          logger.error({ err }, 'shutdown failed');
          resolve(clean);
        },
      );
    };
    process.once('SIGINT', () => stop('SIGINT', drainMs));
    process.once('SIGTERM', () => stop('SIGTERM', drainMs));
    // A fault that escaped every handler goes to the log as such (not only to stderr), and the daemon stops as
    // for a signal without the drain, so open connections are recorded and the counters written before the
    // process exits non-zero; a stop that itself hangs is cut after FATAL_STOP_MS.
    const fatal = (err: unknown, what: string): void => {
      logger.fatal({ err }, `${what}: stopping the daemon`);
      // Also during a stop already under way (a signal's drain): the fault may be what keeps it from ending.
      if (clean)
        setTimeout(() => {
          logger.fatal({ ms: FATAL_STOP_MS }, 'stop after an uncaught error did not finish: exiting');
          process.exit(1);
        }, FATAL_STOP_MS).unref();
      clean = false;
      stop(what, 0);
    };
    process.on('uncaughtException', (err) => fatal(err, 'uncaught exception'));
    process.on('unhandledRejection', (err) => fatal(err, 'unhandled rejection'));
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
