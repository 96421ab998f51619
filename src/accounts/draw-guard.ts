// Draws are where accounts meet the pool: no draw while the account's balance is known to be empty, the
// egress address whitelisted before an API draw, and a failed draw that smells of balance re-polls it.
import type { Drawer } from '../pool/drawer.ts';
import type { UpstreamNode } from '../pool/types.ts';
import { AccountRefusedError } from '../pool/account-refusal.ts';

/** The account's balance is known to be empty: the customer is refused (403 with this reason), no draw is made. */
export class DrawRefusedError extends AccountRefusedError {
  constructor(message: string) {
    super(message, 'DRAW_REFUSED');
  }
}

/** The drawing user as the guard needs it. */
export interface GuardedUser {
  /** The local user (its sub account's name), for healing a lost sub account. */
  name?: string;
  mainAccount: string;
  draw: 'pwd' | 'api';
}

/** Structurally src/accounts/whitelist.ts Whitelist and src/accounts/balances.ts BalanceWatcher. */
export interface DrawGuardDeps {
  whitelist: { ensure(account: string, productNo: string): Promise<void> };
  balances: {
    canDraw(account: string, productNo: string): boolean;
    drawFailed(err: unknown): void;
    /**
     * Reads a pair's balance when it was never read (a user made since the last poll), so its first draw
     * is not the platform's refusal of an empty account; refuses `user` at once when it is empty.
     */
    known?(account: string, productNo: string, user: string | undefined): Promise<void>;
  };
  /** src/accounts/heal.ts SubAccountHealer: a draw answered "no such sub account" re-creates it, then draws again. */
  heal?: { lost(user: string, err: unknown): Promise<boolean> };
}

export function guardDrawer(inner: Drawer, user: GuardedUser, productNo: string, deps: DrawGuardDeps): Drawer {
  return {
    async draw(count: number): Promise<UpstreamNode[]> {
      await deps.balances.known?.(user.mainAccount, productNo, user.name);
      if (!deps.balances.canDraw(user.mainAccount, productNo)) {
        throw new DrawRefusedError(`traffic balance of ${user.mainAccount} for ${productNo} is exhausted`);
      }
      if (user.draw === 'api') await deps.whitelist.ensure(user.mainAccount, productNo);
      try {
        return await inner.draw(count);
      } catch (err) {
        if (deps.heal && user.name !== undefined && (await deps.heal.lost(user.name, err))) return inner.draw(count);
        deps.balances.drawFailed(err);
        throw err;
      }
    },
  };
}
