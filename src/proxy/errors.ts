// Stable failure codes of the gateway and how each is answered on either listener.
import { REPLY, type ReplyCode } from '../wire/socks5.ts';
import type { FailureReason } from '../pool/types.ts';
import { RotorError } from '../errors/rotor-error.ts';

/** A dial through one upstream node failed. `reason` is what the pool is told. */
export class UpstreamDialError extends Error {
  readonly code = 'UPSTREAM_DIAL_FAILED';
  constructor(
    readonly reason: FailureReason,
    message: string,
    /** The upstream or the target did not answer in time (HTTP 504, SOCKS 0x04) rather than refused. */
    readonly timedOut: boolean = reason === 'connect_timeout',
  ) {
    super(message);
    this.name = 'UpstreamDialError';
  }
}

/** The client went away (or the caller aborted) while a dial was in flight. */
export class DialAbortedError extends Error {
  readonly code = 'DIAL_ABORTED';
  constructor() {
    super('dial aborted: the client went away');
    this.name = 'DialAbortedError';
  }
}

export type GatewayErrorCode = 'NO_UPSTREAM' | 'UPSTREAM_TIMEOUT' | 'UPSTREAM_FAILED' | 'LIMITED' | 'DIAL_ABORTED';

/** Each code's answer on either listener and, where the caller's text may name an upstream, the text shown. */
const ANSWERS: Record<GatewayErrorCode, { httpStatus: number; socksReply: ReplyCode; shown?: string }> = {
  NO_UPSTREAM: { httpStatus: 503, socksReply: REPLY.networkUnreachable },
  UPSTREAM_TIMEOUT: { httpStatus: 504, socksReply: REPLY.hostUnreachable, shown: 'the upstream did not answer in time' },
  UPSTREAM_FAILED: { httpStatus: 502, socksReply: REPLY.connectionRefused, shown: 'the upstream failed' },
  LIMITED: { httpStatus: 403, socksReply: REPLY.notAllowed },
  DIAL_ABORTED: { httpStatus: 499, socksReply: REPLY.generalFailure },
};

/**
 * What Router.dial rejects with: one code, the answer for each listener (RotorError's httpStatus and
 * socksReply), a one-line message safe to show the client. An upstream failure's own text names the node's
 * address, so it is kept as `detail` (for logs) and the message says only what failed.
 */
export class GatewayError extends RotorError {
  declare readonly code: GatewayErrorCode;
  declare readonly socksReply: ReplyCode;
  /** The text the error was raised with (may name an upstream host:port): logs only, never a client. */
  readonly detail: string;

  constructor(
    code: GatewayErrorCode,
    message: string,
    /** last upstream failure, when there was one */
    readonly upstreamReason?: FailureReason,
  ) {
    const answer = ANSWERS[code];
    super(code, answer.shown ?? message, { httpStatus: answer.httpStatus, socksReply: answer.socksReply });
    this.detail = message;
  }
}
