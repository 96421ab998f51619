// Failures of the users directory, on the one base type (src/errors/rotor-error.ts): the admin API answers
// with their status and code; none carries a password, but for a pending creation's generated one.
import { RotorError } from '../errors/rotor-error.ts';

export class UserExistsError extends RotorError {
  constructor(name: string, creating = false) {
    super('USER_EXISTS', creating ? `user ${name} is being created (its platform sub account is on the way)` : `user ${name} exists`, {
      httpStatus: 409,
    });
  }
}

/**
 * A creation whose platform step ended without an answer to go by (a transport failure, or a system error still
 * answered after the retries): its intent is kept and the next sweep finishes it. Answered as the platform being
 * unreachable (503), and with the password the user will have when Rotor generated it (given once, here).
 */
export class UserPendingError extends RotorError {
  /**
   * The generated password the user is being created with (the admin API's reply carries it). Not enumerable:
   * a logged error never shows it.
   */
  declare readonly generatedPassword: string | undefined;
  constructor(name: string, cause: unknown) {
    super(
      'PLATFORM_UNREACHABLE',
      `user ${name} is being created: the platform did not answer for its sub account; it is finished in the background`,
      { httpStatus: 503, cause },
    );
  }

  /** Carries the generated password to the admin API's answer (set once, never enumerated). */
  withPassword(password: string): this {
    Object.defineProperty(this, 'generatedPassword', { value: password, enumerable: false });
    return this;
  }

  override replyFields(): Readonly<Record<string, string>> | undefined {
    return this.generatedPassword === undefined ? undefined : { password: this.generatedPassword };
  }
}

export class UserNotFoundError extends RotorError {
  constructor(name: string) {
    super('UNKNOWN_USER', `unknown user ${name}`, { httpStatus: 404 });
  }
}

export class UserChangedError extends RotorError {
  constructor(name: string) {
    super('USER_CHANGED', `user ${name} was changed meanwhile (by another request or daemon); read it and try again`, { httpStatus: 409 });
  }
}

export class UserInvalidError extends RotorError {
  constructor(message: string) {
    super('INVALID_INPUT', message, { httpStatus: 400 });
  }
}

/** A user's `listen.port` that is taken: a port of this daemon, another user's, or bound by another process. */
export class PortInUseError extends RotorError {
  constructor(port: number, by: string) {
    super('PORT_IN_USE', `listen.port ${port} is already in use (${by})`, { httpStatus: 409 });
  }
}

/**
 * A user's `products` naming a product the merchant's catalogue does not hold (the platform refused it): the
 * field is named (`products.<i>`, or `users.<n>.products.<i>` in the config), answered 422.
 */
export class UnknownProductError extends RotorError {
  constructor(
    readonly field: string,
    readonly productNo: string,
  ) {
    super('UNKNOWN_PRODUCT', `${field}: unknown product '${productNo}' (the merchant's catalogue does not hold it)`, { httpStatus: 422 });
  }
}
