// A customer's state as the portal and the dashboard name it, worst first: the proxy refuses the first three.
import type { UserView } from '../users/record.ts';

export type CustomerState = 'disabled' | 'expired' | 'spent' | 'near_limit' | 'enabled';

export function customerState(u: Pick<UserView, 'enabled' | 'expiresAt' | 'usedBytes' | 'limitBytes'>, now: number): CustomerState {
  if (!u.enabled) return 'disabled';
  if (u.expiresAt && Date.parse(u.expiresAt) <= now) return 'expired';
  if (u.limitBytes >= 0 && u.usedBytes >= u.limitBytes) return 'spent';
  if (u.limitBytes > 0 && u.usedBytes >= 0.8 * u.limitBytes) return 'near_limit';
  return 'enabled';
}
