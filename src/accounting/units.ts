// The one place where megabytes meet bytes (seed part 8). The platform speaks MB in: product `flow`, the
// create-sub-account `limitFlow`, ProxyInfo balances (`used`, `total`, `balance`), and the traffic-return
// `flowNum`; it speaks bytes in: the set-limit `limitFlow`, GetProxyUserInfo `limitFlow`/`useFlow`, and the
// flow-use log. Inside Rotor every amount of traffic is bytes; conversions happen only through this module.
//
// How many bytes a "MB" is depends on the product's `flowConversionBase` (1000 -> 1,000,000 bytes;
// 1024 -> 1,048,576 bytes). The seed allows 0 = unknown/unsupported and is silent elsewhere, so Rotor
// decides: an unknown base is 1000 (1 MB = 1,000,000 bytes). That is the cautious reading in every direction
// Rotor converts: a local byte limit rounded up to whole MB at base 1000 is never below the same limit at
// base 1024 (so a platform-side limit never cuts a user off before Rotor's own, exact one), and a balance
// in MB read as bytes at base 1000 never overstates what is left.
import { RotorError } from '../errors/rotor-error.ts';

/** A product's traffic base as Rotor uses it. */
export type FlowBase = 1000 | 1024;

/** The base assumed when the product does not say (flowConversionBase 0, absent or anything else). */
export const DEFAULT_FLOW_BASE: FlowBase = 1000;

/** Seed 4.18 / part 8: a positive set-limit `limitFlow` must be at least this many bytes. */
export const MIN_PLATFORM_LIMIT_BYTES = 1_024_000;

/** -1 means "no limit" in every limit field, local and platform. */
export const UNLIMITED = -1;

/** A units rule broken by a caller (admin input, config); `code` is stable. */
export class UnitsError extends RotorError {
  declare readonly code: 'LIMIT_INVALID' | 'AMOUNT_INVALID';
  readonly field: string;
  constructor(code: 'LIMIT_INVALID' | 'AMOUNT_INVALID', field: string, message: string) {
    // Always the caller's input: 400 on the admin API.
    super(code, `${field}: ${message}`, { httpStatus: 400 });
    this.field = field;
  }
}

/** The product's `flowConversionBase` as a base; 0, absent or an unexpected value -> DEFAULT_FLOW_BASE. */
export function flowBase(flowConversionBase: number | null | undefined): FlowBase {
  return flowConversionBase === 1024 ? 1024 : flowConversionBase === 1000 ? 1000 : DEFAULT_FLOW_BASE;
}

/** Bytes in one platform MB for this base: 1,000,000 or 1,048,576. */
export function bytesPerMb(base: FlowBase = DEFAULT_FLOW_BASE): number {
  return base * base;
}

/**
 * A platform MB amount (balances, `flow`, may be fractional: ProxyInfo sends strings like "12.5") as whole
 * bytes, rounded down so a balance is never overstated.
 */
export function mbToBytes(mb: number, base: FlowBase = DEFAULT_FLOW_BASE): number {
  if (!Number.isFinite(mb)) throw new UnitsError('AMOUNT_INVALID', 'mb', 'must be a finite number');
  return Math.floor(mb * bytesPerMb(base));
}

/** Bytes as whole MB rounded up (an allowance that must cover `bytes`). */
export function bytesToWholeMbCeil(bytes: number, base: FlowBase = DEFAULT_FLOW_BASE): number {
  return Math.ceil(bytes / bytesPerMb(base));
}

/** Checks a local limit in bytes: -1 (unlimited) or a whole number >= 0. Returns it. */
export function checkLocalLimit(limitBytes: number, field = 'limitBytes'): number {
  if (!Number.isSafeInteger(limitBytes) || limitBytes < UNLIMITED) {
    throw new UnitsError('LIMIT_INVALID', field, 'must be -1 (unlimited) or a whole number of bytes >= 0');
  }
  return limitBytes;
}

/**
 * The set-limit `limitFlow` (bytes) that backs a local limit: -1 stays -1; a local limit below the platform's
 * minimum becomes 1,024,000 (Rotor enforces the exact, smaller limit itself); anything else is sent as is.
 */
export function platformLimitFor(localLimitBytes: number): number {
  checkLocalLimit(localLimitBytes);
  if (localLimitBytes === UNLIMITED) return UNLIMITED;
  return Math.max(localLimitBytes, MIN_PLATFORM_LIMIT_BYTES);
}

/**
 * Bytes the platform-side limit sits above Rotor's own. The platform relays (and counts) every byte before
 * Rotor sees it, so a platform limit equal to the local one always trips first: the platform cuts the
 * connection with Rotor's counter still just under the limit, and the user's next connection is admitted
 * by Rotor only to be refused upstream (a 502 / SOCKS 0x05 instead of a clear 403 / 0x02). Rotor overshoots
 * its limit by at most one chunk per open connection (64 KiB), so 1 MiB covers 16 connections at once; 1 %
 * covers counting differences that grow with volume.
 */
export const PLATFORM_LIMIT_HEADROOM_BYTES = 1_048_576;

/**
 * The set-limit `limitFlow` (bytes) Rotor keeps on the platform for a local limit: a backstop strictly
 * looser than the local limit (see PLATFORM_LIMIT_HEADROOM_BYTES), never below the platform's minimum;
 * -1 stays -1.
 */
export function platformBackstopFor(localLimitBytes: number): number {
  checkLocalLimit(localLimitBytes);
  if (localLimitBytes === UNLIMITED) return UNLIMITED;
  const headroom = Math.max(PLATFORM_LIMIT_HEADROOM_BYTES, Math.ceil(localLimitBytes / 100));
  return platformLimitFor(Math.min(Number.MAX_SAFE_INTEGER, localLimitBytes + headroom));
}

/**
 * The create-sub-account `limitFlow` (whole MB) that backs a local limit: -1 stays -1; otherwise the local
 * limit rounded up to whole MB, and at least 1 (the sandbox, like a cautious reading of the seed, takes
 * 0 as "unlimited", which a 0-byte local limit must not become).
 */
export function createLimitMbFor(localLimitBytes: number, base: FlowBase = DEFAULT_FLOW_BASE): number {
  checkLocalLimit(localLimitBytes);
  if (localLimitBytes === UNLIMITED) return UNLIMITED;
  return Math.max(1, bytesToWholeMbCeil(localLimitBytes, base));
}

/** Checks a traffic-return `flowNum` (whole MB >= 1) or `ipNum` (whole count >= 1). Returns it. */
export function checkWholeAmount(value: number, field: 'flowNum' | 'ipNum'): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new UnitsError(
      'AMOUNT_INVALID',
      field,
      field === 'flowNum' ? 'must be a whole number of MB >= 1' : 'must be a whole number >= 1',
    );
  }
  return value;
}
