// Money and traffic units. Money is held as integer ten-thousandths so per-MB prices (0.0040) add up exactly.
// Traffic is held in bytes; MB converts with the product's flowConversionBase (1000 or 1024): 1 MB = base².
import { InternalError } from '../../errors/rotor-error.ts';

export const MONEY_SCALE = 10_000;

/** "12.5" → 125000 */
export function parseMoney(text: string): number {
  const n = Number(text);
  if (!Number.isFinite(n)) throw new InternalError(`not a price: ${text}`);
  return Math.round(n * MONEY_SCALE);
}

/** 125000 → "12.50"; keeps up to four decimals when needed ("0.0040" → "0.004"). */
export function formatMoney(units: number): string {
  const sign = units < 0 ? '-' : '';
  const abs = Math.abs(Math.round(units));
  const whole = Math.floor(abs / MONEY_SCALE);
  let frac = String(abs % MONEY_SCALE)
    .padStart(4, '0')
    .replace(/0+$/, '');
  if (frac.length < 2) frac = frac.padEnd(2, '0');
  return `${sign}${whole}.${frac}`;
}

export function bytesPerMb(base: number): number {
  return base === 1000 ? 1_000_000 : 1_048_576;
}

/** Bytes → MB with three decimals, as the balance query's strings. */
export function mbString(bytes: number, base: number): string {
  return (bytes / bytesPerMb(base)).toFixed(3);
}
