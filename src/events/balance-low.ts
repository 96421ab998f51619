// `balance.low`: fed by the balance watcher (src/accounts/balances.ts onBalance) with every balance it reads.
// A (main account, product) is low when its traffic runs out or falls under `lowMb` (for products sold by IP
// count: when no IP is left). The event fires once per low spell: its marker `balance.low:<account>:<product>`
// is written with it and cleared when the balance is back above the line, so a restart or a second daemon
// polling the same account does not repeat it, and the next spell is announced again.
import type { Logger } from '../telemetry/logger.ts';
import type { EventSink } from './types.ts';

/** The fields of src/accounts/balances.ts Balance this needs. */
export interface BalanceReading {
  account: string;
  productNo: string;
  balanceMb: number;
  balanceBytes: number;
  hasBalance: boolean;
  ipTotal: number | undefined;
}

/** `lowMb` may be a function: it is read at every balance, so a reload (SIGHUP) moves the line at once. */
export function balanceLowListener(events: EventSink, lowMb: number | (() => number), logger?: Logger): (b: BalanceReading) => void {
  const line = typeof lowMb === 'function' ? lowMb : () => lowMb;
  /** pairs known to be low here, so a steady low balance costs no store call per poll */
  const low = new Set<string>();
  const seen = new Set<string>();
  return (b) => {
    const key = `${b.account}:${b.productNo}`;
    const marker = `balance.low:${key}`;
    const thresholdMb = line();
    const isLow = !b.hasBalance || (b.ipTotal === undefined && b.balanceMb < thresholdMb);
    const first = !seen.has(key);
    seen.add(key);
    if (isLow && !low.has(key)) {
      low.add(key);
      events
        .emit(
          'balance.low',
          {
            account: b.account,
            productNo: b.productNo,
            balanceMb: b.balanceMb,
            balanceBytes: b.balanceBytes,
            thresholdMb,
            exhausted: !b.hasBalance,
          },
          { marker },
        )
        .catch((err: unknown) => {
          low.delete(key);
          logger?.warn({ err, account: b.account, productNo: b.productNo }, 'balance event could not be recorded');
        });
    } else if (!isLow && (low.has(key) || first)) {
      // Back above the line (or first sight after a start: the spell may have ended while Rotor was down):
      // re-arm for the next low spell.
      low.delete(key);
      events.clearMarker(marker).catch((err: unknown) => logger?.warn({ err }, 'balance event marker could not be cleared'));
    }
  };
}
