// The users directory as the admin routes see it (src/admin/deps.ts UsersPort).
import type { UsersPort } from '../admin/deps.ts';
import { createBatch, type BatchOptions } from '../users/bulk.ts';
import type { Users } from '../users/directory.ts';

/** A user whose platform account Rotor could not make (src/accounts/heal.ts), shown as `platformAccount`. */
export type PlatformAccountOf = (name: string) => { state: string; reason: string; at: number } | undefined;

export function usersPort(users: Users, batch: Omit<BatchOptions, 'hash'> = {}, platformAccountOf?: PlatformAccountOf): UsersPort {
  return {
    createBatch: (rows) => createBatch(users, rows, batch),
    list: (query) => users.list(query),
    get: (name) => {
      const view = users.view(name);
      const account = view && platformAccountOf?.(name);
      return view && account
        ? Object.assign(view, { platformAccount: { state: account.state, reason: account.reason, at: new Date(account.at).toISOString() } })
        : view;
    },
    create: (input) => users.create(input),
    patch: (name, patch) => users.patch(name, patch),
    remove: (name) => users.remove(name),
    setPassword: (name, password) => users.setPassword(name, password),
    setLimit: (name, limitBytes) => users.setLimit(name, limitBytes),
  };
}
