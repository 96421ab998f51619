// How the daemon takes a new configuration while it serves (SIGHUP). One reload runs at a time, in the order
// asked, so the last file read is the one in force. Everything that can refuse the file — the users' products,
// files the config names — is read before anything changes: a refused reload changes nothing. A step that fails
// after changes began (a store write) is tried again; if it still fails, the reload is reported as applied in
// part, naming the step, never as "kept". Changed settings a reload does not apply are named in a warning.
import type { Config } from '../config/schema.ts';
import { RotorError } from '../errors/rotor-error.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { AdminToken } from '../admin/auth.ts';
import type { AccountsPart } from './accounts.ts';
import type { EventsPart } from './events.ts';
import type { GatewayPart } from './gateway.ts';
import type { UsersPart } from './users.ts';
import type { WatchersPart } from './watchers.ts';

export class ReloadIncompleteError extends RotorError {
  constructor(
    readonly step: string,
    attempts: number,
    cause: unknown,
  ) {
    super(
      'CONFIG_RELOAD_INCOMPLETE',
      `configuration reload applied in part: its step "${step}" failed ${attempts} times and the steps after it did not run; send SIGHUP again once the cause is mended`,
      { cause },
    );
  }
}

export interface ReloadStep {
  readonly name: string;
  run(): Promise<void> | void;
}

export interface ReloaderOptions {
  /** Reads and checks all the new config needs (throws = refused, nothing changed); returns the steps that apply it. */
  prepare(next: Config): Promise<readonly ReloadStep[]>;
  /** Waits before each new try of a failed step; default 0.5 s, then 2 s. */
  retryDelaysMs?: readonly number[];
  sleep?: (ms: number) => Promise<void>;
}

/** A reload function that runs one reload at a time, each after the ones asked before it. */
export function serialReloader(options: ReloaderOptions): (next: Config) => Promise<void> {
  const delays = options.retryDelaysMs ?? [500, 2000];
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()));
  const runStep = async (step: ReloadStep): Promise<void> => {
    for (let attempt = 0; ; attempt++) {
      try {
        await step.run();
        return;
      } catch (err) {
        const delay = delays[attempt];
        if (delay === undefined) throw new ReloadIncompleteError(step.name, attempt + 1, err);
        await sleep(delay);
      }
    }
  };
  let chain: Promise<unknown> = Promise.resolve();
  return (next) => {
    const run = chain.then(async () => {
      for (const step of await options.prepare(next)) await runStep(step);
    });
    chain = run.catch(() => undefined);
    return run;
  };
}

/** Config keys (and the keys below them) a reload applies. */
const APPLIED = ['users', 'events', 'proxy.rules', 'proxy.requestRules', 'pool.tls', 'proxy.udp', 'proxy.https.cert', 'proxy.https.key'];

/**
 * The keys whose value differs between two configs and that a reload does not apply (they take effect at the
 * next start). Names only: values may be secrets.
 */
export function settingsNeedingRestart(current: Config, next: Config, applied: readonly string[] = APPLIED): string[] {
  const out: string[] = [];
  const walk = (a: unknown, b: unknown, path: string): void => {
    if (applied.some((key) => path === key || path.startsWith(`${key}.`))) return;
    if (isPlainObject(a) && isPlainObject(b)) {
      for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) walk(a[key], b[key], path ? `${path}.${key}` : key);
      return;
    }
    if (JSON.stringify(a) !== JSON.stringify(b)) out.push(path);
  };
  walk(current, next, '');
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export interface ReloadParts {
  accounts: AccountsPart;
  events: EventsPart;
  watchers: WatchersPart;
  users: UsersPart;
  gateway: GatewayPart;
  adminToken: AdminToken;
  logger: Logger;
  /** The config in force, and its replacement once the reload has run. */
  current(): Config;
  replace(next: Config): void;
}

/** The daemon's reload: the steps of a new config, in the order the components depend on each other. */
export function assembleReload(parts: ReloadParts): (next: Config) => Promise<void> {
  const { accounts, events, watchers, users, gateway, adminToken, logger } = parts;
  return serialReloader({
    async prepare(next) {
      // Config users are seeded again (config fields win); API users stay. Pools of users that went away or
      // changed how they draw are dropped; live connections keep their node.
      const nextUsers = await accounts.resolve(next.users);
      // A config user naming a product the catalogue does not hold refuses the file (users.<n>.products.<i>).
      await users.directory.checkConfigProducts(nextUsers);
      const applyGateway = await gateway.prepareReload(next);
      const current = parts.current();
      const tokenChanged = next.admin.token !== current.admin.token;
      let tokenTaken = false;
      return [
        {
          // First: it depends on nothing and cannot fail, and rotating a leaked token must not wait on a store.
          name: 'admin token',
          run: () => {
            tokenTaken = tokenChanged && adminToken.replace(next.admin.token);
            if (tokenTaken) logger.info('admin token replaced: the previous one no longer opens the admin API');
          },
        },
        {
          name: 'events',
          run: async () => {
            await events.reload(next.events);
            watchers.reload(next.events);
          },
        },
        { name: 'users', run: () => users.directory.seed(nextUsers) },
        { name: 'gateway', run: applyGateway },
        { name: 'accounts', run: () => accounts.apply(nextUsers) },
        {
          name: 'followers',
          run: () => {
            // A reload names nobody: every component that follows users takes all of them again.
            users.changes.emit([], []);
            // A user new to the config gets its platform-side backstop now (in the background), not at the next sync interval.
            accounts.platformCheck.start(users.directory.locals());
          },
        },
        { name: 'tls', run: () => gateway.reloadTls(next) },
        {
          name: 'done',
          run: () => {
            const unapplied = settingsNeedingRestart(current, next).filter((key) => key !== 'admin.token');
            if (tokenChanged && !tokenTaken) unapplied.push('admin.token');
            if (unapplied.length > 0)
              logger.warn({ keys: unapplied }, 'changed settings a reload does not apply: they take effect at the next start');
            parts.replace(next);
            logger.info({ users: nextUsers.map((u) => u.name) }, 'configuration reloaded');
          },
        },
      ];
    },
  });
}
