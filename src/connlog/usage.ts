// GET /v1/usage's rows: the rollups with the amount billed (bytes × price per GB / 2^30, in
// billing.currency), as JSON rows or CSV with a header line; and the platform's own count beside Rotor's
// (?compare=platform): the flow-use log (ProxyFlowUseLog, bytes) of each main account and product, summed
// into the same periods, so the difference is traffic the platform charged that Rotor did not bill.
import { periodStart } from '../store/connection-log-rollup.ts';
import type { Granularity, UsageRollup } from './types.ts';

const GIB = 2 ** 30;

export interface UsageRow {
  user: string;
  /** the period's start, RFC 3339 (UTC) */
  period: string;
  bytesUp: number;
  bytesDown: number;
  connections: number;
  failures: number;
  /** in billing.currency; null when neither the user nor billing.defaultPricePerGb sets a price */
  amount: number | null;
}

export const USAGE_COLUMNS = ['user', 'period', 'bytesUp', 'bytesDown', 'connections', 'failures', 'amount'] as const;

/** The price per GB of a user: its own, else the default; null = none. */
export type PriceOf = (user: string) => number | null;

/** Money to 1e-6 of a unit: enough for any currency, free of binary-fraction noise in the output. */
function money(v: number): number {
  return Math.round(v * 1e6) / 1e6;
}

export function amountFor(bytes: number, pricePerGb: number | null): number | null {
  return pricePerGb === null ? null : money((bytes * pricePerGb) / GIB);
}

export function usageRows(rollups: readonly UsageRollup[], priceOf: PriceOf): UsageRow[] {
  return rollups.map((r) => ({
    user: r.user,
    period: new Date(r.period).toISOString(),
    bytesUp: r.bytesUp,
    bytesDown: r.bytesDown,
    connections: r.connections,
    failures: r.failures,
    amount: amountFor(r.bytesUp + r.bytesDown, priceOf(r.user)),
  }));
}

/** RFC 4180: a field holding a comma, quote or line break is quoted, quotes doubled. */
function csvField(v: unknown): string {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCsv(columns: readonly string[], rows: readonly Record<string, unknown>[]): string {
  let out = `${columns.join(',')}\r\n`;
  for (const row of rows) out += `${columns.map((c) => csvField(row[c])).join(',')}\r\n`;
  return out;
}

/** One main account and product in one period: Rotor's bytes (its users') beside the platform's. */
export interface PlatformCompareRow {
  account: string;
  productNo: string;
  period: string;
  /** bytes Rotor counted for the users of this main account and product */
  rotorBytes: number;
  /** bytes the platform's flow-use log charged; null when the platform keeps no log for the product */
  platformBytes: number | null;
  /** platformBytes - rotorBytes (traffic charged and not billed); null without platformBytes */
  differenceBytes: number | null;
}

export const COMPARE_COLUMNS = ['account', 'productNo', 'period', 'rotorBytes', 'platformBytes', 'differenceBytes'] as const;

export interface UserAccount {
  mainAccount: string;
  product: string;
}

/** The platform's flow-use entries of one account and product in [from, to): bytes and epoch ms. */
export type PlatformFlow = (
  account: string,
  productNo: string,
  from: number,
  to: number,
) => Promise<{ usedBytes: number; at: number }[] | null>;

export async function comparePlatform(
  rollups: readonly UsageRollup[],
  accountOf: (user: string) => UserAccount | undefined,
  flow: PlatformFlow,
  window: { from: number; to: number; granularity: Granularity },
): Promise<PlatformCompareRow[]> {
  // Rotor's side, per (account, product, period).
  const rows = new Map<string, PlatformCompareRow>();
  const pairs = new Map<string, UserAccount>();
  const rowFor = (account: string, productNo: string, period: number): PlatformCompareRow => {
    const key = `${account}\u0000${productNo}\u0000${period}`;
    let row = rows.get(key);
    if (!row) {
      row = { account, productNo, period: new Date(period).toISOString(), rotorBytes: 0, platformBytes: null, differenceBytes: null };
      rows.set(key, row);
    }
    return row;
  };
  for (const r of rollups) {
    const a = accountOf(r.user);
    if (!a || a.product === '') continue;
    pairs.set(`${a.mainAccount}\u0000${a.product}`, a);
    rowFor(a.mainAccount, a.product, r.period).rotorBytes += r.bytesUp + r.bytesDown;
  }
  // The platform's side, one log read per pair.
  for (const a of pairs.values()) {
    const entries = await flow(a.mainAccount, a.product, window.from, window.to);
    if (entries === null) continue;
    for (const row of rows.values()) if (row.account === a.mainAccount && row.productNo === a.product) row.platformBytes = 0;
    for (const e of entries) {
      if (e.at < window.from || e.at >= window.to) continue;
      const row = rowFor(a.mainAccount, a.product, periodStart(e.at, window.granularity));
      row.platformBytes = (row.platformBytes ?? 0) + e.usedBytes;
    }
  }
  const out = [...rows.values()];
  for (const row of out) row.differenceBytes = row.platformBytes === null ? null : row.platformBytes - row.rotorBytes;
  return out.sort((x, y) =>
    x.period < y.period ? -1 : x.period > y.period ? 1 : x.account < y.account ? -1 : x.account > y.account ? 1 : 0,
  );
}
