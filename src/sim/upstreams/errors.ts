// Stable failure codes of the simulator's upstream proxies, for the few failures that reach a caller (the
// relay's own failures are answered on the wire: 407/403/502, SOCKS5 reply codes).
import { RotorError } from '../../errors/rotor-error.ts';

export type UpstreamErrorCode =
  | 'UPSTREAM_BAD_CREDENTIAL' // a drawn credential that cannot be encoded into a user name
  | 'UPSTREAM_BAD_OPTIONS' // startUpstreams options out of range
  | 'UPSTREAM_LISTEN_FAILED' // a port could not be opened
  | 'UPSTREAM_CLOSED'; // the upstreams were closed

export class UpstreamError extends RotorError {
  declare readonly code: UpstreamErrorCode;
  constructor(code: UpstreamErrorCode, message: string) {
    super(code, message);
  }
}
