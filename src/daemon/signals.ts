// How `rotor start` lives under a service manager: SIGINT/SIGTERM drain and stop the daemon, SIGHUP reloads the
// configuration file (read off the event loop; an invalid file is refused and the running config kept).
import { reloadConfig } from '../config/index.ts';
import type { Logger } from '../telemetry/logger.ts';
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
    process.on('SIGHUP', () => {
      void (async () => {
        try {
          const next = await reloadConfig(configFile ? { file: configFile } : {});
          await daemon.reload(next);
        } catch (err) {
          logger.error({ err }, 'reload refused; the running configuration is kept');
        }
      })();
    });
  });
}
