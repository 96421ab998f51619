// The one base type of every failure Rotor raises at a boundary (after fastify's createError and undici's
// UndiciError): a stable, namespaced code, a one-line message safe to show, and where it is defined the answer
// it maps to on each surface — the admin API's HTTP status, the HTTP proxy listener's status, the SOCKS5
// reply. Whoever answers a client reads those fields from the error; no table elsewhere keyed by codes.
// This module imports nothing of Rotor's, so every component may depend on it.

export interface RotorErrorOptions {
  /** HTTP status the admin API (or the HTTP proxy listener) answers with; absent = 500. */
  httpStatus?: number;
  /** RFC 1928 reply code the SOCKS5 listener answers with; absent = 0x01 (general failure). */
  socksReply?: number;
  /** The platform's code, when the platform refused. */
  platformCode?: number;
  cause?: unknown;
}

export class RotorError extends Error {
  /** Stable code, UPPER_SNAKE (e.g. `USER_EXISTS`); part of the admin API's contract. */
  readonly code: string;
  readonly httpStatus: number;
  readonly socksReply: number;
  readonly platformCode: number | undefined;

  constructor(code: string, message: string, options: RotorErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.httpStatus = options.httpStatus ?? 500;
    this.socksReply = options.socksReply ?? 0x01;
    this.platformCode = options.platformCode;
  }

  /**
   * Fields the admin API's error body carries beside code and message, for the one who asked only (e.g. the
   * password of a creation finished in the background). Kept off the error's own enumerable properties so a
   * logged or serialised error never shows them.
   */
  replyFields(): Readonly<Record<string, string>> | undefined {
    return undefined;
  }
}

export const isRotorError = (err: unknown): err is RotorError => err instanceof RotorError;

/**
 * A defect or a broken invariant inside Rotor (a constructor given a nonsensical setting, unreadable state of
 * its own making): never the client's fault, answered 500 with a code that says so.
 */
export class InternalError extends RotorError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('INTERNAL', message, options);
  }
}
