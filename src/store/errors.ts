// Store failures with stable codes. Messages name tables and keys, never record contents.

export class StoreError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreError';
    this.code = code;
  }
}

/** A unique key is taken (e.g. a merchant number journaled twice). */
export class StoreConflictError extends StoreError {
  constructor(what: string) {
    super('STORE_CONFLICT', `${what} already exists`);
    this.name = 'StoreConflictError';
  }
}

/** The store is closed, or the configured location cannot be opened. */
export class StoreUnavailableError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('STORE_UNAVAILABLE', message, options);
    this.name = 'StoreUnavailableError';
  }
}
