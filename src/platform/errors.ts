// The client's failures, one class per condition with a stable `code` (modelled on undici's lib/core/errors.js).
// Callers branch on the class or on `code`; platform refusals also carry the part 7 number and its meaning.
// No message ever includes request parameters or the secret: only operation names, field paths, codes.
import type { z } from 'zod';
import { CODE, codeMeaning } from './codes.ts';

/** Everything the platform client throws derives from this. */
export abstract class PlatformClientError extends Error {
  abstract readonly code: string;
  readonly operation: string;
  /** The reqId sent, when something was sent. */
  readonly reqId: string | undefined;

  constructor(message: string, operation: string, reqId: string | undefined, options?: { cause?: unknown }) {
    super(message, options);
    this.operation = operation;
    this.reqId = reqId;
  }
}

export type PlatformCondition = keyof typeof CODE | 'UNKNOWN';

const CONDITION_BY_CODE = new Map<number, PlatformCondition>(
  (Object.entries(CODE) as [keyof typeof CODE, number][]).map(([name, n]) => [n, name]),
);

/** The platform answered, with a code other than 200. Its `data` was not parsed. */
export class PlatformError extends PlatformClientError {
  readonly code = 'PLATFORM_ERROR';
  readonly platformCode: number;
  /** The seed's meaning of the code (part 7). */
  readonly meaning: string;
  /** The platform's own `msg`. */
  readonly platformMsg: string;
  /** The name of the code in codes.ts (`ORDER_NOT_FOUND` for 10031); `UNKNOWN` for codes the seed does not list. */
  readonly condition: PlatformCondition;

  constructor(args: { operation: string; reqId: string | undefined; platformCode: number; platformMsg: string }) {
    const meaning = codeMeaning(args.platformCode);
    super(`platform error ${args.platformCode}: ${args.platformMsg || meaning}`, args.operation, args.reqId);
    this.name = 'PlatformError';
    this.platformCode = args.platformCode;
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

function describeIssues(issues: FieldIssue[]): string {
  return issues.map((i) => `${i.path || '(request)'}: ${i.message}`).join('; ');
}

/** The request breaks the operation's schema or a part 8 limit; nothing was sent. */
export class RequestInvalidError extends PlatformClientError {
  readonly code = 'REQUEST_INVALID';
  readonly issues: FieldIssue[];
  /** The first offending field's path. */
  readonly field: string;

  constructor(operation: string, issues: FieldIssue[]) {
    super(`${operation}: invalid request: ${describeIssues(issues)}`, operation, undefined);
    this.name = 'RequestInvalidError';
    this.issues = issues;
    this.field = issues[0]?.path ?? '';
  }
}

/** The operation name is not in the table. */
export class UnknownOperationError extends PlatformClientError {
  readonly code = 'UNKNOWN_OPERATION';
  constructor(operation: string) {
    super(`unknown operation ${JSON.stringify(operation)}`, operation, undefined);
    this.name = 'UnknownOperationError';
  }
}

export type TransportReason =
  | 'timeout'
  | 'refused'
  | 'reset'
  | 'dns'
  | 'network'
  | 'tls'
  | 'http_status'
  | 'bad_envelope'
  | 'too_large'
  | 'aborted';

/** No usable answer reached us: timeout, refused, dropped, an HTTP error page, a body that is not an envelope. */
export class TransportError extends PlatformClientError {
  readonly code = 'TRANSPORT';
  readonly reason: TransportReason;
  /** HTTP status, when a response arrived. */
  readonly httpStatus: number | undefined;

  constructor(args: { operation: string; reqId: string | undefined; reason: TransportReason; detail: string; httpStatus?: number; cause?: unknown }) {
    super(`${args.operation}: transport failure (${args.reason}): ${args.detail}`, args.operation, args.reqId, { cause: args.cause });
    this.name = 'TransportError';
    this.reason = args.reason;
    this.httpStatus = args.httpStatus;
  }
}

/** The platform said 200 but its `data` does not decrypt with our secret, or decrypts to something not JSON. */
export class DecryptReplyError extends PlatformClientError {
  readonly code = 'DECRYPT_REPLY';
  readonly reason: string;

  constructor(operation: string, reqId: string, reason: string) {
    super(`${operation}: undecryptable reply: ${reason}`, operation, reqId);
    this.name = 'DecryptReplyError';
    this.reason = reason;
  }
}

/** The platform said 200 without `data` for an operation whose answer carries a record. */
export class EmptyReplyError extends PlatformClientError {
  readonly code = 'EMPTY_REPLY';
  constructor(operation: string, reqId: string) {
    super(`${operation}: the platform answered 200 without data`, operation, reqId);
    this.name = 'EmptyReplyError';
  }
}

/** The decrypted answer does not fit the operation's response schema (lenient as it is). */
export class ResponseInvalidError extends PlatformClientError {
  readonly code = 'RESPONSE_INVALID';
  readonly issues: FieldIssue[];
  readonly field: string;

  constructor(operation: string, reqId: string, issues: FieldIssue[]) {
    super(`${operation}: unexpected reply: ${describeIssues(issues)}`, operation, reqId);
    this.name = 'ResponseInvalidError';
    this.issues = issues;
    this.field = issues[0]?.path ?? '';
  }
}

/** Retrying is safe and useful: the request may not have been processed, or the platform failed internally. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof PlatformError) return err.platformCode === CODE.SYSTEM;
  if (err instanceof TransportError) {
    if (err.reason === 'http_status') return err.httpStatus !== undefined && err.httpStatus >= 500;
    return err.reason === 'timeout' || err.reason === 'refused' || err.reason === 'reset' || err.reason === 'network' || err.reason === 'dns';
  }
  return false;
}

/** The client was constructed with settings it cannot work with (bad base URL, bad timeouts). */
export class ClientConfigError extends Error {
  readonly code = 'CLIENT_CONFIG';
  readonly key: string;
  constructor(key: string, problem: string) {
    super(`${key}: ${problem}`);
    this.name = 'ClientConfigError';
    this.key = key;
  }
}
