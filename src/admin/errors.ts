// The admin API's error catalogue (after fastify's lib/errors.js): every failure a route can meet becomes
// {"error":{"code","message","platformCode"?}} with one HTTP status. Typed errors of the components are
// mapped here, in one place; anything unrecognised is a 500 whose message says nothing of its insides.
import type { FastifyError } from 'fastify';
import { PlatformClientError, PlatformError, RequestInvalidError, TransportError, UnknownOperationError } from '../platform/errors.ts';

export interface ErrorBody {
  error: { code: string; message: string; platformCode?: number };
}

export interface ErrorReply {
  status: number;
  body: ErrorBody;
}

/** A failure raised by the admin routes themselves. */
export class AdminError extends Error {
  readonly code: string;
  readonly httpStatus: number;
  readonly platformCode: number | undefined;

  constructor(httpStatus: number, code: string, message: string, platformCode?: number) {
    super(message);
    this.name = 'AdminError';
    this.httpStatus = httpStatus;
    this.code = code;
    this.platformCode = platformCode;
  }
}

/** The admin server was asked to start in a way that would expose it (no token off loopback). */
export class AdminConfigError extends Error {
  readonly code = 'ADMIN_CONFIG';
  readonly key: string;
  constructor(key: string, message: string) {
    super(`${key}: ${message}`);
    this.name = 'AdminConfigError';
    this.key = key;
  }
}

export const notFound = (what: string) => new AdminError(404, 'NOT_FOUND', `${what} not found`);
export const invalid = (message: string) => new AdminError(400, 'INVALID_INPUT', message);

// Component error codes that are not input or platform failures, by HTTP status. Codes not listed fall
// back to the error's own `httpStatus` when it has one, else 500.
const STATUS_BY_CODE: Record<string, number> = {
  // accounts
  INVALID_INPUT: 400,
  NO_PRODUCT: 404,
  NOT_SUPPORTED: 409,
  MAIN_ACCOUNT_NAME_TAKEN: 409,
  MAIN_ACCOUNT_UNUSABLE: 409,
  EGRESS_UNKNOWN: 503,
  // accounting
  UNKNOWN_USER: 404,
  ACCOUNTING_CLOSED: 503,
  LIMIT_INVALID: 400,
  AMOUNT_INVALID: 400,
  // store
  STORE_CONFLICT: 409,
  STORE_UNAVAILABLE: 503,
  STORE_UNSUPPORTED: 503,
  // pool
  POOL_EMPTY: 503,
};

interface Coded {
  code?: unknown;
  httpStatus?: unknown;
  platformCode?: unknown;
  field?: unknown;
  message?: unknown;
}

function reply(status: number, code: string, message: string, platformCode?: number): ErrorReply {
  const error: ErrorBody['error'] = { code, message };
  if (platformCode !== undefined) error.platformCode = platformCode;
  return { status, body: { error } };
}

/** Ajv's first complaint as `<where>.<field>: <problem>` (the field is what a script needs to fix). */
function validationReply(err: FastifyError): ErrorReply {
  const first = err.validation?.[0];
  const where = err.validationContext ?? 'request';
  if (!first) return reply(400, 'INVALID_INPUT', `${where}: ${err.message}`);
  const params = (first.params ?? {}) as Record<string, unknown>;
  const segments = first.instancePath.split('/').filter(Boolean);
  let problem = first.message ?? 'is invalid';
  if (typeof params.missingProperty === 'string') {
    segments.push(params.missingProperty);
    problem = 'is required';
  } else if (typeof params.additionalProperty === 'string') {
    segments.push(params.additionalProperty);
    problem = 'is not a known field';
  }
  const field = segments.join('.');
  return reply(400, 'INVALID_INPUT', `${where}${field ? '.' + field : ''}: ${problem}`);
}

/** Maps anything thrown by a route (or by fastify before it) to the admin API's error shape. */
export function toErrorReply(err: unknown): ErrorReply {
  if (err instanceof AdminError) return reply(err.httpStatus, err.code, err.message, err.platformCode);
  if (err instanceof PlatformError) {
    return reply(502, 'PLATFORM_ERROR', `${err.operation}: platform refused with ${err.platformCode}: ${err.platformMsg || err.meaning}`, err.platformCode);
  }
  if (err instanceof TransportError) return reply(503, 'PLATFORM_UNREACHABLE', `${err.operation}: platform unreachable (${err.reason})`);
  if (err instanceof RequestInvalidError) {
    const detail = err.issues.map((i) => `${i.path || '(request)'}: ${i.message}`).join('; ');
    return reply(400, 'INVALID_INPUT', detail);
  }
  if (err instanceof UnknownOperationError) return reply(404, 'UNKNOWN_OPERATION', `no platform operation named ${JSON.stringify(err.operation)}`);
  // Decrypt, empty and unreadable replies: the platform answered, but not with something usable.
  if (err instanceof PlatformClientError) return reply(502, err.code, err.message);

  const e = (typeof err === 'object' && err !== null ? err : {}) as Coded & Partial<FastifyError>;
  if (Array.isArray(e.validation)) return validationReply(e as FastifyError);
  // fastify's own request errors (bad JSON, wrong content type, body too large): 4xx with their code.
  if (typeof e.code === 'string' && e.code.startsWith('FST_') && typeof e.statusCode === 'number' && e.statusCode < 500) {
    return reply(e.statusCode, fastifyCode(e.code, e.statusCode), String(e.message ?? 'bad request'));
  }
  if (typeof e.code === 'string' && /^[A-Z][A-Z0-9_]*$/.test(e.code)) {
    const status = STATUS_BY_CODE[e.code] ?? (typeof e.httpStatus === 'number' ? e.httpStatus : undefined);
    if (status !== undefined) {
      const platformCode = typeof e.platformCode === 'number' ? e.platformCode : undefined;
      const message = typeof e.message === 'string' && e.message ? e.message : e.code;
      return reply(status, e.code, message, platformCode);
    }
  }
  return reply(500, 'INTERNAL', 'internal error');
}

function fastifyCode(code: string, status: number): string {
  if (status === 413) return 'BODY_TOO_LARGE';
  if (status === 415) return 'UNSUPPORTED_MEDIA_TYPE';
  if (code === 'FST_ERR_CTP_INVALID_JSON_BODY' || code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return 'INVALID_JSON';
  if (status === 404) return 'NOT_FOUND';
  if (code === 'FST_ERR_MAX_PARAM_LENGTH') return 'URI_TOO_LONG';
  return 'INVALID_INPUT';
}
