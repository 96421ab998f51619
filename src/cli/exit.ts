// Exit codes of docs/reference.md and how each failure maps to one. The message printed names the key or field
// and never carries a secret (the errors themselves never hold one).
import { ConfigError } from '../config/load.ts';
import { SecretLengthError } from '../platform/envelope.ts';
import { ListenAddressError } from '../startup/ports.ts';
import { TlsConfigError } from '../proxy/https-listener.ts';
import {
  ClientConfigError,
  DecryptReplyError,
  EmptyReplyError,
  PlatformError,
  RequestInvalidError,
  ResponseInvalidError,
  TransportError,
  UnknownOperationError,
} from '../platform/errors.ts';
import { RotorError } from '../errors/rotor-error.ts';

export const EXIT = {
  OK: 0,
  /** Unexpected internal failure. */
  INTERNAL: 1,
  /** Bad usage or invalid config. */
  USAGE: 2,
  /** The platform answered a non-200 code. */
  PLATFORM: 3,
  /** Timeout, refused, bad TLS, undecryptable reply. */
  TRANSPORT: 4,
} as const;

/** Wrong arguments on the command line. */
export class UsageError extends RotorError {
  constructor(message: string) {
    super('USAGE', message, { httpStatus: 400 });
  }
}

/** The exit code and the one-line (or, for config, multi-line) message for a failure. */
export function describeFailure(err: unknown): { exitCode: number; message: string } {
  if (err instanceof PlatformError) {
    return { exitCode: EXIT.PLATFORM, message: `platform error ${err.platformCode}: ${err.platformMsg || err.meaning}` };
  }
  if (
    err instanceof TransportError ||
    err instanceof DecryptReplyError ||
    err instanceof EmptyReplyError ||
    err instanceof ResponseInvalidError
  ) {
    return { exitCode: EXIT.TRANSPORT, message: err.message };
  }
  if (
    err instanceof UsageError ||
    err instanceof RequestInvalidError ||
    err instanceof UnknownOperationError ||
    err instanceof ConfigError
  ) {
    return { exitCode: EXIT.USAGE, message: err.message };
  }
  // A listener address that cannot be bound is a configuration problem: the message names the key.
  if (err instanceof ListenAddressError) return { exitCode: EXIT.USAGE, message: err.message };
  if (err instanceof TlsConfigError) return { exitCode: EXIT.USAGE, message: err.message };
  // A store another process holds (src/store/store-lock.ts) is refused by design, not a crash: the fix is the
  // other daemon or this one's store.path, so it is named like any other config key (by code: cli does not import store).
  if (err instanceof RotorError && err.code === 'STORE_IN_USE') return { exitCode: EXIT.USAGE, message: `store.path: ${err.message}` };
  if (err instanceof SecretLengthError) return { exitCode: EXIT.USAGE, message: `platform.appSecret: ${err.message}` };
  if (err instanceof ClientConfigError) return { exitCode: EXIT.USAGE, message: `platform.${err.message}` };
  if (err instanceof Error && (err as { code?: unknown }).code === 'NOT_WIRED') return { exitCode: EXIT.USAGE, message: err.message };
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return { exitCode: EXIT.INTERNAL, message: `internal error: ${message}` };
}
