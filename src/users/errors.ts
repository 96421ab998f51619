// Failures of the users directory, on the one base type (src/errors/rotor-error.ts): the admin API answers
// with their status and code; none carries a password.
import { RotorError } from '../errors/rotor-error.ts';

export class UserExistsError extends RotorError {
  constructor(name: string, creating = false) {
    super('USER_EXISTS', creating ? `user ${name} is being created (its platform sub account is on the way)` : `user ${name} exists`, {
      httpStatus: 409,
    });
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
