// An account the platform will not serve (no traffic left, disabled): a refusal of the customer, answered 403
// with the reason, never an upstream failure. A draw refused for it costs no platform call, so the pool does
// not back off after one: the next draw after the balance comes back goes out at once.
import { RotorError } from '../errors/rotor-error.ts';

/** RFC 1928 0x02, connection not allowed by ruleset. */
const SOCKS_NOT_ALLOWED = 0x02;

export class AccountRefusedError extends RotorError {
  constructor(message: string, code = 'ACCOUNT_REFUSED') {
    super(code, message, { httpStatus: 403, socksReply: SOCKS_NOT_ALLOWED });
  }
}
