// The Proxy-Status header (RFC 9209) on every answer Rotor writes itself: `rotor; error=<type>;
// details="<one line>"`. The error type is one of the RFC's registered types (§2.3), derived here and only
// here: from a GatewayError's code and upstream reason, else from the answer's status.
import type { FailureReason } from '../pool/types.ts';

/** The RFC 9209 §2.3 error types Rotor answers with. */
export type ProxyErrorType =
  | 'http_request_denied'
  | 'http_request_error'
  | 'http_response_timeout'
  | 'http_protocol_error'
  | 'connection_refused'
  | 'connection_terminated'
  | 'connection_timeout'
  | 'destination_unavailable'
  | 'destination_ip_prohibited'
  | 'proxy_internal_error';

/** The proxy's name as Proxy-Status lists it (RFC 9209 §2: a token naming this intermediary). */
export const PROXY_NAME = 'rotor';

/**
 * The error type of an upstream failure, by what the pool was told: a refused or reset connection is said as
 * such; a failed handshake, refused credentials or a stall make the next hop unavailable.
 */
export function upstreamErrorType(reason: FailureReason | undefined, timedOut: boolean): ProxyErrorType {
  if (timedOut) return 'connection_timeout';
  switch (reason) {
    case 'connect_timeout':
      return 'connection_timeout';
    case 'refused':
    case 'target_refused':
      return 'connection_refused';
    case 'reset':
      return 'connection_terminated';
    default:
      return 'destination_unavailable';
  }
}

/** The error type of an answer that carries no more than its status (refusals, failures of node:http). */
export function statusErrorType(status: number): ProxyErrorType {
  switch (status) {
    case 400:
      return 'http_request_error';
    case 403:
    case 407:
      return 'http_request_denied';
    case 504:
      return 'connection_timeout';
    case 502:
    case 503:
      return 'destination_unavailable';
    default:
      return status >= 500 ? 'proxy_internal_error' : 'http_request_denied';
  }
}

/**
 * The header's value. `details` becomes an RFC 8941 string: printable ASCII only (anything else is '?'),
 * backslash and quote escaped, bounded, so a client's input echoed in a reason cannot break the field.
 */
export function proxyStatus(type: ProxyErrorType, details: string): string {
  let text = '';
  const n = Math.min(details.length, 200);
  for (let i = 0; i < n; i++) {
    const c = details.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) text += '?';
    else if (c === 0x22 || c === 0x5c) text += `\\${details[i]}`;
    else text += details[i];
  }
  return `${PROXY_NAME}; error=${type}; details="${text}"`;
}
