// Users imported straight into the store, for a daemon that is not running (`rotor users import FILE --store`,
// or when no daemon answers at the admin address). Each row is checked as POST /v1/users/batch checks it and
// written as a creation intent (state 'creating'): the daemon finishes it at its next start exactly as it
// finishes a creation a crash interrupted (the platform sub account made, then the record made ready), so the
// platform is called by the daemon alone and with its bounded concurrency.
import type { UserStore } from '../store/types.ts';
import { StoreConflictError } from '../store/errors.ts';
import { rowSecret, validateBatch, hashForBulk, type BatchResult, type BatchRowError, type ValidRow } from './bulk.ts';
import { PortInUseError } from './errors.ts';
import { checkUserTls } from './port-check.ts';
import { readStoredData, type UserData } from './record.ts';

export interface StoreImportOptions {
  /** The daemon's own listener ports by number (portsByNumber of the config), refused as users' ports. */
  reservedPorts: ReadonlyMap<number, string>;
  /** Users the config file defines: their names are taken. */
  configUsers: readonly string[];
  /** Whether user ports may ask for TLS (proxy.https configured). */
  tls: boolean;
  /** Chosen passwords hashed at once (scrypt on libuv's pool); default 4. */
  concurrency?: number;
  now?: () => number;
  hash?: (password: string) => Promise<string>;
}

/** The rows' listen.port against the stored users', the daemon's own and each other's: the clashes as row errors. */
function portClashes(valid: ValidRow[], owners: Map<number, string>, reserved: ReadonlyMap<number, string>): Map<number, BatchRowError> {
  const clashes = new Map<number, BatchRowError>();
  for (const { index, row } of valid) {
    const port = row.listen?.port;
    if (port === undefined || port === 0) continue;
    const by = reserved.get(port) ?? (owners.has(port) ? `user ${owners.get(port)!}'s port` : undefined);
    if (by !== undefined) {
      const err = new PortInUseError(port, by);
      clashes.set(index, { index, name: row.name, code: err.code, message: err.message });
    } else owners.set(port, row.name);
  }
  return clashes;
}

export async function importIntoStore(
  store: Pick<UserStore, 'listUsers' | 'putUser'>,
  rows: readonly unknown[],
  options: StoreImportOptions,
): Promise<BatchResult> {
  const now = options.now ?? Date.now;
  const hash = options.hash ?? hashForBulk;
  const taken = new Set(options.configUsers);
  const owners = new Map<number, string>();
  for (const stored of await store.listUsers()) {
    taken.add(stored.name);
    const port = readStoredData(stored.name, stored.data)?.listen?.port;
    if (port !== undefined && port !== 0) owners.set(port, stored.name);
  }
  const { valid, errors } = await validateBatch(rows, (name) => taken.has(name));
  const clashes = portClashes(valid, owners, options.reservedPorts);
  errors.push(...clashes.values());
  const passwords: Record<string, string> = {};
  let created = 0;
  let next = 0;
  const rest = valid.filter(({ index }) => !clashes.has(index));
  const one = async ({ index, row }: ValidRow): Promise<void> => {
    const { password: _password, passwordHash: _hash, ...fields } = row;
    try {
      checkUserTls({ host: '', reserved: () => options.reservedPorts, tls: options.tls }, fields.listen);
      const { stored, generated } = await rowSecret(row, hash);
      const data: UserData = { ...fields, source: 'api', createdAt: now() };
      await store.putUser({ name: row.name, data, passwordHash: stored, state: 'creating' }, { ifAbsent: true });
      created++;
      if (generated !== undefined) passwords[row.name] = generated;
    } catch (err) {
      if (err instanceof StoreConflictError)
        errors.push({ index, name: row.name, code: 'USER_EXISTS', message: `user ${row.name} exists` });
      else if (err instanceof Error && 'code' in err && typeof err.code === 'string')
        errors.push({ index, name: row.name, code: err.code, message: err.message });
      else throw err;
    }
  };
  const worker = async (): Promise<void> => {
    while (next < rest.length) await one(rest[next++]!);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency ?? 4, rest.length)) }, worker));
  errors.sort((a, b) => a.index - b.index);
  return { created, errors, passwords };
}
