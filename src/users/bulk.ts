// Many users at once (POST /v1/users/batch, `rotor users import`): each row validated on its own, a row
// that fails does not stop the others, and every failure comes back with its index, name, code and message.
//
// Cost per row: a generated password is stored as a SHA-256 (src/admission/password.ts: no scrypt); a
// chosen password is hashed with scrypt on libuv's pool (the `hash` option, never on the event loop); a
// `passwordHash` (an scrypt hash in Rotor's format) is stored as given. The platform step (the sub account)
// runs `concurrency` rows at a time, creating first and reading only when the name exists (one or two
// calls per row). Rows are journaled like a single creation (src/users/directory.ts): a crash or an
// unreachable platform leaves intents the sweep finishes.
import { z } from 'zod';
import { RotorError } from '../errors/rotor-error.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { HashedCreation, Users } from './directory.ts';
import { generatePassword, hashGeneratedPassword, hashPasswordAsync, importedHashProblem, passwordDigest } from '../admission/password.ts';
import { createUserSchema } from './record.ts';
import { UserPendingError } from './errors.ts';
import { SUB_ACCOUNT_WINDOW_MAX } from './sub-account.ts';

/** Rows in one batch (the CLI sends 1,000 at a time). */
export const BATCH_MAX = 10_000;
/**
 * Rows whose platform step may run at once, by default: the sub accounts' window (src/users/sub-account.ts)
 * decides how many of them do (16 at first, up to 64 while the platform keeps up, fewer when it strains).
 */
export const BATCH_CONCURRENCY = SUB_ACCOUNT_WINDOW_MAX;

/** A batch row: a POST /v1/users record, or one with `passwordHash` instead of `password`. */
export const batchRowSchema = createUserSchema
  .extend({ passwordHash: z.string().max(512).optional() })
  .refine((r) => r.password === undefined || r.passwordHash === undefined, {
    message: 'give password or passwordHash, not both',
    path: ['passwordHash'],
  });

export const batchBodySchema = z.strictObject({ users: z.array(z.unknown()).min(1).max(BATCH_MAX) });

export interface BatchRowError {
  index: number;
  name: string | null;
  code: string;
  message: string;
}

export interface BatchResult {
  created: number;
  errors: BatchRowError[];
  /** Passwords Rotor generated, by user name: shown this once. */
  passwords: Record<string, string>;
}

export interface BatchOptions {
  concurrency?: number;
  /** Hashes a chosen password off the event loop (default: hashPasswordAsync, the bulk priority). */
  hash?: (password: string) => Promise<string>;
  logger?: Logger;
}

/** The one place a chosen password of a bulk row is hashed (scrypt on libuv's pool). */
export const hashForBulk = (password: string): Promise<string> => hashPasswordAsync(password, { priority: 'bulk' });

const yieldNow = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function zodMessage(err: z.ZodError): string {
  const issue = err.issues[0];
  if (!issue) return 'invalid row';
  const path = issue.path.join('.');
  return path ? `${path}: ${issue.message}` : issue.message;
}

/** A valid row and its place in the batch. */
export interface ValidRow {
  index: number;
  row: z.output<typeof batchRowSchema>;
}

/**
 * Each row checked on its own: its schema, an imported hash's format, a name given twice in the batch, a name
 * that `exists` already. Yields to the event loop every 256 rows.
 */
export async function validateBatch(
  rows: readonly unknown[],
  exists: (name: string) => boolean,
): Promise<{ valid: ValidRow[]; errors: BatchRowError[] }> {
  const errors: BatchRowError[] = [];
  const valid: ValidRow[] = [];
  const seen = new Set<string>();
  for (let index = 0; index < rows.length; index++) {
    if (index % 256 === 255) await yieldNow();
    const raw = rows[index];
    const rawName =
      typeof raw === 'object' && raw !== null && typeof (raw as { name?: unknown }).name === 'string'
        ? String((raw as { name: string }).name).slice(0, 64)
        : null;
    const parsed = batchRowSchema.safeParse(raw);
    if (!parsed.success) {
      errors.push({ index, name: rawName, code: 'INVALID_INPUT', message: zodMessage(parsed.error) });
      continue;
    }
    const row = parsed.data;
    if (row.passwordHash !== undefined) {
      const problem = importedHashProblem(row.passwordHash);
      if (problem) {
        errors.push({ index, name: row.name, code: 'INVALID_INPUT', message: `passwordHash: ${problem}` });
        continue;
      }
    }
    if (seen.has(row.name)) {
      errors.push({ index, name: row.name, code: 'USER_EXISTS', message: `user ${row.name} appears earlier in this batch` });
      continue;
    }
    seen.add(row.name);
    if (exists(row.name)) {
      errors.push({ index, name: row.name, code: 'USER_EXISTS', message: `user ${row.name} exists` });
      continue;
    }
    valid.push({ index, row });
  }
  return { valid, errors };
}

/**
 * What a row's password becomes: an imported hash as given, a chosen password hashed by `hash` (scrypt off the
 * event loop), or a generated one (returned once) kept as its digest. `digest`: the password's SHA-256 when known.
 */
export async function rowSecret(
  row: z.output<typeof batchRowSchema>,
  hash: (password: string) => Promise<string>,
): Promise<{ stored: string; digest: Buffer | null; generated: string | undefined }> {
  if (row.passwordHash !== undefined) return { stored: row.passwordHash, digest: null, generated: undefined };
  if (row.password !== undefined) return { stored: await hash(row.password), digest: passwordDigest(row.password), generated: undefined };
  const generated = generatePassword();
  return { stored: hashGeneratedPassword(generated), digest: passwordDigest(generated), generated };
}

export async function createBatch(users: Users, rows: readonly unknown[], options: BatchOptions = {}): Promise<BatchResult> {
  const started = Date.now();
  const hash = options.hash ?? hashForBulk;
  const passwords: Record<string, string> = {};
  const { valid, errors } = await validateBatch(rows, (name) => users.view(name) !== undefined);

  // The passwords first (a chosen one is an scrypt on libuv's pool: `concurrency` at a time), then the
  // creations together (Users.createMany: one store transaction for the intents, one for the records made ready).
  const concurrency = Math.max(1, options.concurrency ?? BATCH_CONCURRENCY);
  const rowsOut: ({ at: number; generated: string | undefined } | undefined)[] = new Array(valid.length);
  const creations: HashedCreation[] = [];
  const report = (index: number, name: string, err: unknown): void => {
    const code = err instanceof RotorError ? err.code : 'INTERNAL';
    const message = err instanceof RotorError ? err.message : 'internal error (see the daemon log)';
    if (!(err instanceof RotorError)) options.logger?.error({ err, user: name }, 'batch row failed');
    errors.push({ index, name, code, message });
  };
  let next = 0;
  const secrets = async (): Promise<void> => {
    while (next < valid.length) {
      const i = next++;
      const { row } = valid[i]!;
      try {
        const { stored, digest, generated } = await rowSecret(row, hash);
        const { password: _password, passwordHash: _hash, ...fields } = row;
        rowsOut[i] = { at: creations.length, generated };
        creations.push({ fields, hash: stored, digest });
      } catch (err) {
        report(valid[i]!.index, row.name, err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, valid.length) }, secrets));
  const failures = await users.createMany(creations, { concurrency });
  let created = 0;
  valid.forEach(({ index, row }, i) => {
    const out = rowsOut[i];
    if (out === undefined) return;
    const failure = failures[out.at];
    if (failure !== undefined) {
      // Finished in the background with this password: the row says so, and its password is given now.
      if (failure instanceof UserPendingError && out.generated !== undefined) passwords[row.name] = out.generated;
      return report(index, row.name, failure);
    }
    created++;
    if (out.generated !== undefined) passwords[row.name] = out.generated;
  });
  errors.sort((a, b) => a.index - b.index);
  options.logger?.info({ rows: rows.length, created, failed: errors.length, ms: Date.now() - started }, 'user batch created');
  return { created, errors, passwords };
}
