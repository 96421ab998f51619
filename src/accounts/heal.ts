// A platform that lost a sub account (deleted behind Rotor's back, a platform reset, a sandbox restarted
// without its state) answers draws and limit syncs with 10062 / 10092. Rotor then re-creates the account
// once with the user's own settings (the same step that made it: CreateProxyUser under its main account,
// the main account too when missing, and the platform-side limit), logs it and counts it
// (rotor_sub_account_heals_total{outcome}). One attempt per user at a time and at most one per `retryMs`:
// a platform that keeps refusing is not hammered from the data path's refills. A user whose account cannot
// be made is remembered with the reason (shown in GET /v1/users/:name as `platformAccount`).
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { CODE } from '../platform/codes.ts';
import { isPlatformCode } from './errors.ts';

/** The platform's answer meaning "no such sub account". */
export function isLostSubAccount(err: unknown): boolean {
  return isPlatformCode(err, CODE.SUB_NOT_FOUND, CODE.SUB_USERNAME_NOT_FOUND);
}

export interface PlatformAccountState {
  state: 'failed';
  reason: string;
  /** epoch ms of the last attempt */
  at: number;
}

export interface SubAccountHealerOptions {
  /** Makes the user's platform side again (src/users/sub-account.ts SubAccounts.ensure with the user's record). */
  recreate(user: string): Promise<void>;
  /** Least time between two attempts for one user; default 60 s. */
  retryMs?: number;
  /** Users remembered as failed at most (oldest forgotten first); default 10,000. */
  maxFailed?: number;
  now?: () => number;
  metrics?: Metrics;
  logger?: Logger;
}

export class SubAccountHealer {
  private readonly running = new Map<string, Promise<boolean>>();
  private readonly lastTry = new Map<string, number>();
  private readonly failed = new Map<string, PlatformAccountState>();
  private readonly healedListeners: Array<(user: string) => void> = [];
  private readonly now: () => number;

  constructor(private readonly options: SubAccountHealerOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * `err` came from a platform call for `user`. When it says the sub account is gone, re-creates it (once,
   * shared by concurrent callers); resolves true when the account was made again and the call may be retried.
   */
  lost(user: string, err: unknown): Promise<boolean> {
    if (!isLostSubAccount(err)) return Promise.resolve(false);
    const running = this.running.get(user);
    if (running) return running;
    const last = this.lastTry.get(user);
    if (last !== undefined && this.now() - last < (this.options.retryMs ?? 60_000)) return Promise.resolve(false);
    this.lastTry.set(user, this.now());
    if (this.lastTry.size > (this.options.maxFailed ?? 10_000)) this.lastTry.delete(this.lastTry.keys().next().value!);
    const run = this.heal(user, err).finally(() => this.running.delete(user));
    this.running.set(user, run);
    return run;
  }

  private async heal(user: string, cause: unknown): Promise<boolean> {
    const code = (cause as { platformCode?: number }).platformCode;
    try {
      await this.options.recreate(user);
      this.failed.delete(user);
      for (const listener of this.healedListeners) listener(user);
      this.options.metrics?.subAccountHeals.inc({ outcome: 'created' });
      this.options.logger?.warn({ user, platformCode: code }, "the platform had lost the sub account: re-created with the user's settings");
      return true;
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.failed.delete(user);
      this.failed.set(user, { state: 'failed', reason, at: this.now() });
      if (this.failed.size > (this.options.maxFailed ?? 10_000)) this.failed.delete(this.failed.keys().next().value!);
      this.options.metrics?.subAccountHeals.inc({ outcome: 'failed' });
      this.options.logger?.error({ user, platformCode: code, err }, 'the platform had lost the sub account and it could not be made again');
      return false;
    }
  }

  /**
   * Called with each user whose account was made again: a platform may give the new account a new password,
   * so whatever was drawn under the lost one is void (src/daemon/pools.ts drops the user's held nodes).
   */
  onHealed(listener: (user: string) => void): void {
    this.healedListeners.push(listener);
  }

  /** The user's platform account when Rotor could not make it; undefined when nothing is known to be wrong. */
  stateOf(user: string): PlatformAccountState | undefined {
    return this.failed.get(user);
  }

  /** The user is gone: nothing more to remember. */
  forget(user: string): void {
    this.failed.delete(user);
    this.lastTry.delete(user);
  }
}
