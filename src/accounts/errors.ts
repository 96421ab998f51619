// Failures of the accounts component, with stable codes the admin API maps to HTTP statuses. Messages name
// accounts and products, never passwords.
import { PlatformError } from '../platform/errors.ts';

export type AccountsErrorCode =
  /** The main account's name is taken by something that is not a main account (10051 and not readable). */
  | 'MAIN_ACCOUNT_NAME_TAKEN'
  /** A sub account cannot be created: its main account is missing or disabled (10061, sub not readable). */
  | 'MAIN_ACCOUNT_UNUSABLE'
  /** No dynamic product to act on (user without `product` and no authorized dynamic product). */
  | 'NO_PRODUCT'
  /** The product does not support what was asked (whitelist, flow log, sub-account limits). */
  | 'NOT_SUPPORTED'
  /** No egress address to whitelist could be learned. */
  | 'EGRESS_UNKNOWN'
  /** Invalid input (admin routes). */
  | 'INVALID_INPUT';

export class AccountsError extends Error {
  readonly code: AccountsErrorCode;
  /** The platform's code, when the platform refused. */
  readonly platformCode: number | undefined;

  constructor(code: AccountsErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AccountsError';
    this.code = code;
    const cause = options?.cause;
    this.platformCode = cause instanceof PlatformError ? cause.platformCode : undefined;
  }
}

/** Is this a platform refusal with one of these codes? */
export function isPlatformCode(err: unknown, ...codes: number[]): err is PlatformError {
  return err instanceof PlatformError && codes.includes(err.platformCode);
}
