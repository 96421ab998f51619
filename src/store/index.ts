// Opens the store named by config `store.path`: a file path (or ':memory:') selects SQLite. A redis:// URL
// is reserved for the fleet driver, which implements the same Store interface.
import { SqliteStore, type SqliteStoreOptions } from './sqlite.ts';
import { StoreError } from './errors.ts';
import type { Store } from './types.ts';

export * from './types.ts';
export * from './errors.ts';
export { SqliteStore, migrate } from './sqlite.ts';
export { MIGRATIONS } from './migrations.ts';

export function openStore(path: string, options: SqliteStoreOptions = {}): Store {
  if (/^rediss?:\/\//i.test(path)) throw new StoreError('STORE_UNSUPPORTED', 'store.path: the redis driver is not available in this build; use a SQLite file path');
  return new SqliteStore(path, options);
}
