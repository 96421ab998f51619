// The admin API's error shape (after fastify's lib/errors.js): every failure a route can meet becomes
// {"error":{"code","message","platformCode"?}}. The HTTP status is the error's own: each component's error
// class (a RotorError) defines the status it answers with, so nothing here is keyed by other modules' codes.
// fastify's own request errors are translated; anything else is a 500 that says nothing of its insides.
import type { FastifyError } from 'fastify';
import { RotorError } from '../errors/rotor-error.ts';
import { PlatformClientError } from '../platform/errors.ts';

export interface ErrorBody {
  error: { code: string; message: string; platformCode?: number; password?: string; [field: string]: unknown };
}

export interface ErrorReply {
  status: number;
  body: ErrorBody;
}

/** A failure raised by the admin routes themselves. */
export class AdminError extends RotorError {
  constructor(httpStatus: number, code: string, message: string, platformCode?: number) {
    super(code, message, { httpStatus, platformCode });
  }
}

/** The admin server was asked to start in a way that would expose it (no token off loopback). */
export class AdminConfigError extends RotorError {
  readonly key: string;
  constructor(key: string, message: string) {
    super('ADMIN_CONFIG', `${key}: ${message}`);
    this.key = key;
  }
}

export const notFound = (what: string) => new AdminError(404, 'NOT_FOUND', `${what} not found`);
export const invalid = (message: string) => new AdminError(400, 'INVALID_INPUT', message);

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
  // Platform failures are shown from the caller's side (PLATFORM_UNREACHABLE rather than TRANSPORT).
  if (err instanceof PlatformClientError) return reply(err.httpStatus, err.publicCode, err.publicMessage, err.platformCode);
  // A 500 is Rotor's own failure whatever its code: its insides go to the log, not to the caller.
  if (err instanceof RotorError) {
    if (err.httpStatus === 500) return reply(500, 'INTERNAL', 'internal error');
    const answer = reply(err.httpStatus, err.code, err.message, err.platformCode);
    // What the error gives its caller only (a pending creation's generated password); code and message win.
    const extra = err.replyFields();
    if (extra !== undefined) for (const [field, value] of Object.entries(extra)) answer.body.error[field] ??= value;
    return answer;
  }

  const e = (typeof err === 'object' && err !== null ? err : {}) as Coded & Partial<FastifyError>;
  if (Array.isArray(e.validation)) return validationReply(e as FastifyError);
  // fastify's own request errors (bad JSON, wrong content type, body too large): 4xx with their code.
  if (typeof e.code === 'string' && e.code.startsWith('FST_') && typeof e.statusCode === 'number' && e.statusCode < 500) {
    return reply(e.statusCode, fastifyCode(e.code, e.statusCode), String(e.message ?? 'bad request'));
  }
  // A coded error that carries its own status but is not (yet) a RotorError.
  if (typeof e.code === 'string' && /^[A-Z][A-Z0-9_]*$/.test(e.code)) {
    const status = typeof e.httpStatus === 'number' ? e.httpStatus : undefined;
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
