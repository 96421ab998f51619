// Failures of the accounts component, with stable codes and the HTTP status the admin API answers each with. Messages name
// accounts and products, never passwords.
import { RotorError } from '../errors/rotor-error.ts';
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
  | 'INVALID_INPUT'
  /** A traffic return was sent, its answer lost, and the balance does not show whether it was done. */
  | 'RETURN_OUTCOME_UNKNOWN'
  /** A flow-use log window holds more entries than Rotor reads at once (compare=platform): a shorter window. */
  | 'FLOW_LOG_TOO_LONG';

const HTTP_STATUS: Record<AccountsErrorCode, number> = {
  INVALID_INPUT: 400,
  NO_PRODUCT: 404,
  NOT_SUPPORTED: 409,
  MAIN_ACCOUNT_NAME_TAKEN: 409,
  MAIN_ACCOUNT_UNUSABLE: 409,
  EGRESS_UNKNOWN: 503,
  RETURN_OUTCOME_UNKNOWN: 503,
  FLOW_LOG_TOO_LONG: 422,
};

export class AccountsError extends RotorError {
  declare readonly code: AccountsErrorCode;

  constructor(code: AccountsErrorCode, message: string, options?: { cause?: unknown }) {
    const cause = options?.cause;
    // The platform's code rides along when the platform refused.
    super(code, message, {
      httpStatus: HTTP_STATUS[code],
      platformCode: cause instanceof PlatformError ? cause.platformCode : undefined,
      cause,
    });
  }
}

/** Is this a platform refusal with one of these codes? */
export function isPlatformCode(err: unknown, ...codes: number[]): err is PlatformError {
  return err instanceof PlatformError && codes.includes(err.platformCode);
}
