// Store failures with stable codes and the HTTP status the admin API answers each with. Messages name tables
// and keys, never record contents.
import { RotorError } from '../errors/rotor-error.ts';

// Codes with a status of their own; any other STORE_* code (STORE_FAILED, STORE_INVALID, a Redis script's
// own) is an internal failure: 500.
const HTTP_STATUS: Record<string, number> = {
  STORE_CONFLICT: 409,
  STORE_IN_USE: 503,
  STORE_UNAVAILABLE: 503,
  STORE_UNSUPPORTED: 503,
};

export class StoreError extends RotorError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, { httpStatus: HTTP_STATUS[code] ?? 500, cause: options?.cause });
  }
}

/** A unique key is taken (e.g. a merchant number journaled twice). */
export class StoreConflictError extends StoreError {
  constructor(what: string) {
    super('STORE_CONFLICT', `${what} already exists`);
  }
}

/** The store is closed, or the configured location cannot be opened. */
export class StoreUnavailableError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('STORE_UNAVAILABLE', message, options);
  }
}

/** Another daemon (or `rotor users import --store`) holds this SQLite store: one process at a time. */
export class StoreInUseError extends StoreError {
  constructor(message: string) {
    super('STORE_IN_USE', message);
  }
}
