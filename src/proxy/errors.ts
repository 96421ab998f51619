// Stable failure codes of the gateway and how each is answered on either listener.
import { RotorError } from '../errors/rotor-error.ts';
import { REPLY, type ReplyCode } from '../wire/socks5.ts';
import type { FailureReason } from '../pool/types.ts';
import { statusErrorType, upstreamErrorType, type ProxyErrorType } from './proxy-status.ts';

/** A dial through one upstream node failed. `reason` is what the pool is told. */
export class UpstreamDialError extends RotorError {
  constructor(
    readonly reason: FailureReason,
    message: string,
    /** The upstream or the target did not answer in time (HTTP 504, SOCKS 0x04) rather than refused. */
    readonly timedOut: boolean = reason === 'connect_timeout',
  ) {
    super(
      'UPSTREAM_DIAL_FAILED',
      message,
      timedOut ? { httpStatus: 504, socksReply: REPLY.hostUnreachable } : { httpStatus: 502, socksReply: REPLY.connectionRefused },
    );
  }
}

/** The client went away (or the caller aborted) while a dial was in flight. */
export class DialAbortedError extends RotorError {
  constructor() {
    super('DIAL_ABORTED', 'dial aborted: the client went away', { httpStatus: 499 });
  }
}

/**
 * STRICT_SESSION_FAILED: a strict sticky session (`-strict-1`) whose exit failed: it fails rather than move
 * to another exit.
 */
export type GatewayErrorCode =
  | 'NO_UPSTREAM'
  | 'UPSTREAM_TIMEOUT'
  | 'UPSTREAM_FAILED'
  | 'LIMITED'
  | 'DIAL_ABORTED'
  | 'BAD_TARGET'
  | 'NOT_ALLOWED'
  | 'STRICT_SESSION_FAILED'
  /** The platform will not serve the user's account (no traffic, disabled): a refusal of the customer, 403. */
  | 'ACCOUNT_REFUSED';

/**
 * What Router.dial rejects with: one code, the answer for each listener (RotorError's httpStatus and
 * socksReply), a one-line reason that is shown to the client: it never names an upstream's address.
 */
export class GatewayError extends RotorError {
  declare readonly code: GatewayErrorCode;
  declare readonly socksReply: ReplyCode;

  constructor(
    code: GatewayErrorCode,
    message: string,
    /** last upstream failure, when there was one */
    readonly upstreamReason?: FailureReason,
  ) {
    super(code, message, { httpStatus: HTTP_STATUS[code], socksReply: SOCKS_REPLY[code] });
  }

  /** The `result` label of rotor_proxy_connections_total this failure counts under. */
  get connectionResult(): 'limited' | 'not_allowed' | 'bad_request' | 'upstream_error' {
    return this.code === 'LIMITED' || this.code === 'ACCOUNT_REFUSED'
      ? 'limited'
      : this.code === 'NOT_ALLOWED'
        ? 'not_allowed'
        : this.code === 'BAD_TARGET'
          ? 'bad_request'
          : 'upstream_error';
  }

  /** The RFC 9209 error type of this failure's Proxy-Status (src/proxy/proxy-status.ts). */
  get proxyError(): ProxyErrorType {
    switch (this.code) {
      case 'UPSTREAM_TIMEOUT':
      case 'UPSTREAM_FAILED':
        return upstreamErrorType(this.upstreamReason, this.code === 'UPSTREAM_TIMEOUT');
      case 'STRICT_SESSION_FAILED':
        return 'destination_unavailable';
      case 'NOT_ALLOWED':
        return 'destination_ip_prohibited';
      default:
        return statusErrorType(this.httpStatus);
    }
  }
}

const HTTP_STATUS: Record<GatewayErrorCode, number> = {
  NO_UPSTREAM: 503,
  UPSTREAM_TIMEOUT: 504,
  UPSTREAM_FAILED: 502,
  LIMITED: 403,
  DIAL_ABORTED: 499,
  BAD_TARGET: 400,
  NOT_ALLOWED: 403,
  STRICT_SESSION_FAILED: 502,
  ACCOUNT_REFUSED: 403,
};

const SOCKS_REPLY: Record<GatewayErrorCode, ReplyCode> = {
  NO_UPSTREAM: REPLY.networkUnreachable,
  UPSTREAM_TIMEOUT: REPLY.hostUnreachable,
  UPSTREAM_FAILED: REPLY.connectionRefused,
  LIMITED: REPLY.notAllowed,
  DIAL_ABORTED: REPLY.generalFailure,
  BAD_TARGET: REPLY.generalFailure,
  NOT_ALLOWED: REPLY.notAllowed,
  STRICT_SESSION_FAILED: REPLY.networkUnreachable,
  ACCOUNT_REFUSED: REPLY.notAllowed,
};
