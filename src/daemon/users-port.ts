// The users directory as the admin routes see it (src/admin/deps.ts UsersPort).
import type { UsersPort } from '../admin/deps.ts';
import { createBatch, type BatchOptions } from '../users/bulk.ts';
import type { Users } from '../users/directory.ts';

export function usersPort(users: Users, batch: Omit<BatchOptions, 'hash'> = {}): UsersPort {
  return {
    createBatch: (rows) => createBatch(users, rows, batch),
    list: (query) => users.list(query),
    get: (name) => users.view(name),
    create: (input) => users.create(input),
    patch: (name, patch) => users.patch(name, patch),
    remove: (name) => users.remove(name),
    setPassword: (name, password) => users.setPassword(name, password),
    setLimit: (name, limitBytes) => users.setLimit(name, limitBytes),
  };
}
