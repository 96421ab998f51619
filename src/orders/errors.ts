// Failures of the order surface, each with a stable code and the HTTP status the admin API answers with.
// Platform refusals are not wrapped: the client's PlatformError (with platformCode) reaches the caller as is.
// Messages never carry passwords or request bodies.
import { RotorError } from '../errors/rotor-error.ts';
import type { FieldIssue } from '../platform/errors.ts';

export type OrderErrorCode =
  | 'ORDER_INVALID'
  | 'PRODUCT_UNAUTHORIZED'
  | 'PRODUCT_NOT_PURCHASABLE'
  | 'PROJECT_REQUIRED'
  | 'SEGMENT_UNAVAILABLE'
  | 'IP_NOT_PURCHASABLE'
  | 'MERCHANT_NO_CONFLICT'
  | 'ORDER_OUTCOME_UNKNOWN'
  | 'ORDER_NOT_FOUND'
  | 'INSTANCE_NOT_FOUND';

const HTTP_STATUS: Record<OrderErrorCode, number> = {
  ORDER_INVALID: 400,
  PROJECT_REQUIRED: 400,
  PRODUCT_UNAUTHORIZED: 404,
  ORDER_NOT_FOUND: 404,
  INSTANCE_NOT_FOUND: 404,
  PRODUCT_NOT_PURCHASABLE: 409,
  SEGMENT_UNAVAILABLE: 409,
  IP_NOT_PURCHASABLE: 409,
  MERCHANT_NO_CONFLICT: 409,
  ORDER_OUTCOME_UNKNOWN: 503,
};

export class OrderError extends RotorError {
  declare readonly code: OrderErrorCode;
  /** The offending field (dotted path), when one is to blame. */
  readonly field: string | undefined;
  readonly issues: FieldIssue[] | undefined;
  /** The merchant number concerned, when there is one (so a caller can look the order up later). */
  readonly merchantNo: string | undefined;

  constructor(
    code: OrderErrorCode,
    message: string,
    extra: { field?: string; issues?: FieldIssue[]; merchantNo?: string; cause?: unknown } = {},
  ) {
    super(code, message, { httpStatus: HTTP_STATUS[code], cause: extra.cause });
    this.field = extra.field ?? extra.issues?.[0]?.path;
    this.issues = extra.issues;
    this.merchantNo = extra.merchantNo;
  }
}
