// The client's failures, one class per condition with a stable `code` (modelled on undici's lib/core/errors.js).
// Callers branch on the class or on `code`; platform refusals also carry the part 7 number and its meaning.
// No message ever includes request parameters or the secret: only operation names, field paths, codes.
// Each class also says how the admin API answers it: its HTTP status and the code and message shown there
// (`publicCode`/`publicMessage`, which differ from `code`/`message` where the admin contract names the
// condition from the caller's side, e.g. TRANSPORT is shown as PLATFORM_UNREACHABLE).
import type { z } from 'zod';
import { RotorError } from '../errors/rotor-error.ts';
import { CODE, codeMeaning } from './codes.ts';

interface ClientErrorDefinition {
  code: string;
  httpStatus: number;
  message: string;
  operation: string;
  reqId: string | undefined;
  publicCode?: string;
  publicMessage?: string;
  platformCode?: number;
  cause?: unknown;
}

/** Everything the platform client throws derives from this. */
export abstract class PlatformClientError extends RotorError {
  readonly operation: string;
  /** The reqId sent, when something was sent. */
  readonly reqId: string | undefined;
  /** The code the admin API shows for this failure. */
  readonly publicCode: string;
  /** The message the admin API shows for this failure. */
  readonly publicMessage: string;

  constructor(def: ClientErrorDefinition) {
    super(def.code, def.message, { httpStatus: def.httpStatus, platformCode: def.platformCode, cause: def.cause });
    this.operation = def.operation;
    this.reqId = def.reqId;
    this.publicCode = def.publicCode ?? def.code;
    this.publicMessage = def.publicMessage ?? def.message;
  }
}

export type PlatformCondition = keyof typeof CODE | 'UNKNOWN';

const CONDITION_BY_CODE = new Map<number, PlatformCondition>(
  (Object.entries(CODE) as [keyof typeof CODE, number][]).map(([name, n]) => [n, name]),
);

/** The platform answered, with a code other than 200. Its `data` was not parsed. */
export class PlatformError extends PlatformClientError {
  declare readonly platformCode: number;
  /** The seed's meaning of the code (part 7). */
  readonly meaning: string;
  /** The platform's own `msg`. */
  readonly platformMsg: string;
  /** The name of the code in codes.ts (`ORDER_NOT_FOUND` for 10031); `UNKNOWN` for codes the seed does not list. */
  readonly condition: PlatformCondition;

  constructor(args: { operation: string; reqId: string | undefined; platformCode: number; platformMsg: string }) {
    const meaning = codeMeaning(args.platformCode);
    const said = args.platformMsg || meaning;
    super({
      code: 'PLATFORM_ERROR',
      httpStatus: 502,
      message: `platform error ${args.platformCode}: ${said}`,
      publicMessage: `${args.operation}: platform refused with ${args.platformCode}: ${said}`,
      operation: args.operation,
      reqId: args.reqId,
      platformCode: args.platformCode,
    });
    this.meaning = meaning;
    this.platformMsg = args.platformMsg;
    this.condition = CONDITION_BY_CODE.get(args.platformCode) ?? 'UNKNOWN';
  }
}

export interface FieldIssue {
  /** Dotted path of the field (`params.0.count`); empty for the whole object. */
  path: string;
  message: string;
}

export function fieldIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
}

/** `whole` names the object itself when an issue has no field path: '(request)' or '(answer)'. */
function describeIssues(issues: FieldIssue[], whole = '(request)'): string {
  return issues.map((i) => `${i.path || whole}: ${i.message}`).join('; ');
}

/** The request breaks the operation's schema or a part 8 limit; nothing was sent. */
export class RequestInvalidError extends PlatformClientError {
  readonly issues: FieldIssue[];
  /** The first offending field's path. */
  readonly field: string;

  constructor(operation: string, issues: FieldIssue[]) {
    super({
      code: 'REQUEST_INVALID',
      httpStatus: 400,
      message: `${operation}: invalid request: ${describeIssues(issues)}`,
      publicCode: 'INVALID_INPUT',
      publicMessage: describeIssues(issues),
      operation,
      reqId: undefined,
    });
    this.issues = issues;
    this.field = issues[0]?.path ?? '';
  }
}

/** The operation name is not in the table. */
export class UnknownOperationError extends PlatformClientError {
  constructor(operation: string) {
    super({
      code: 'UNKNOWN_OPERATION',
      httpStatus: 404,
      message: `unknown operation ${JSON.stringify(operation)}`,
      publicMessage: `no platform operation named ${JSON.stringify(operation)}`,
      operation,
      reqId: undefined,
    });
  }
}

export type TransportReason =
  'timeout' | 'refused' | 'reset' | 'dns' | 'network' | 'tls' | 'http_status' | 'bad_envelope' | 'too_large' | 'aborted';

/** No usable answer reached us: timeout, refused, dropped, an HTTP error page, a body that is not an envelope. */
export class TransportError extends PlatformClientError {
  readonly reason: TransportReason;
  /** The platform's HTTP status, when a response arrived (not the status the admin API answers with). */
  readonly responseStatus: number | undefined;

  constructor(args: {
    operation: string;
    reqId: string | undefined;
    reason: TransportReason;
    detail: string;
    responseStatus?: number;
    cause?: unknown;
  }) {
    super({
      code: 'TRANSPORT',
      httpStatus: 503,
      message: `${args.operation}: transport failure (${args.reason}): ${args.detail}`,
      publicCode: 'PLATFORM_UNREACHABLE',
      publicMessage: `${args.operation}: platform unreachable (${args.reason})`,
      operation: args.operation,
      reqId: args.reqId,
      cause: args.cause,
    });
    this.reason = args.reason;
    this.responseStatus = args.responseStatus;
  }
}

/** The platform said 200 but its `data` does not decrypt with our secret, or decrypts to something not JSON. */
export class DecryptReplyError extends PlatformClientError {
  readonly reason: string;

  constructor(operation: string, reqId: string, reason: string) {
    super({ code: 'DECRYPT_REPLY', httpStatus: 502, message: `${operation}: undecryptable reply: ${reason}`, operation, reqId });
    this.reason = reason;
  }
}

/** The platform said 200 without `data` for an operation whose answer carries a record. */
export class EmptyReplyError extends PlatformClientError {
  constructor(operation: string, reqId: string) {
    super({ code: 'EMPTY_REPLY', httpStatus: 502, message: `${operation}: the platform answered 200 without data`, operation, reqId });
  }
}

/** The decrypted answer does not fit the operation's response schema (lenient as it is). */
export class ResponseInvalidError extends PlatformClientError {
  readonly issues: FieldIssue[];
  readonly field: string;

  constructor(operation: string, reqId: string, issues: FieldIssue[]) {
    super({
      code: 'RESPONSE_INVALID',
      httpStatus: 502,
      message: `${operation}: unexpected reply: ${describeIssues(issues, '(answer)')}`,
      operation,
      reqId,
    });
    this.issues = issues;
    this.field = issues[0]?.path ?? '';
  }
}

/**
 * The request never reached the platform, or the platform turned it away unread: the connection was refused,
 * the name did not resolve, or HTTP 429. Resending is harmless even for an operation that is not idempotent.
 */
export function neverReached(err: unknown): boolean {
  if (!(err instanceof TransportError)) return false;
  if (err.reason === 'http_status') return err.responseStatus === 429;
  return err.reason === 'refused' || err.reason === 'dns';
}

/** Retrying is safe and useful: the request may not have been processed, or the platform failed internally. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof PlatformError) return err.platformCode === CODE.SYSTEM;
  if (err instanceof TransportError) {
    // 429: the platform's own "too many requests" (the seed shows no rate limits; a platform may still have them).
    // 501 Not Implemented: the platform has no such operation; asking again changes nothing.
    if (err.reason === 'http_status')
      return err.responseStatus !== undefined && ((err.responseStatus >= 500 && err.responseStatus !== 501) || err.responseStatus === 429);
    return (
      err.reason === 'timeout' || err.reason === 'refused' || err.reason === 'reset' || err.reason === 'network' || err.reason === 'dns'
    );
  }
  return false;
}

/** The client was constructed with settings it cannot work with (bad base URL, bad timeouts). */
export class ClientConfigError extends RotorError {
  readonly key: string;
  constructor(key: string, problem: string) {
    super('CLIENT_CONFIG', `${key}: ${problem}`);
    this.key = key;
  }
}
