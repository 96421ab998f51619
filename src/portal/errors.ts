// The portal's refusals, on the one base type: the portal answers with their status and code, in the admin
// API's error shape ({"error":{"code","message"}}). None names another customer or carries a password.
import { RotorError } from '../errors/rotor-error.ts';

export class PortalError extends RotorError {
  constructor(httpStatus: number, code: string, message: string) {
    super(code, message, { httpStatus });
  }
}

/** No session, an unknown or expired one, or a forged cookie: all the same answer. */
export const signedOut = () => new PortalError(401, 'SIGNED_OUT', 'sign in first');
export const badCredentials = () => new PortalError(401, 'BAD_CREDENTIALS', 'wrong user name or password');
export const csrfRefused = () => new PortalError(403, 'CSRF', 'missing or wrong x-rotor-csrf header (it is named in the sign-in answer)');

export class LoginDelayedError extends PortalError {
  constructor(readonly retryAfterSeconds: number) {
    super(429, 'LOGIN_DELAYED', `too many wrong passwords: try again in ${retryAfterSeconds} s`);
  }
}
