// Which entry of a ProxyInfo answer (seed 4.14: `list` of 2.11 entries) is the balance of the product asked for.
// ProxyInfo is asked for one product, but the seed does not say the answer holds only that one: a platform may list
// every product of the account (each entry named, none for a product never bought), or write the one entry's
// `productNo` absent, "" (Go's zero string) or null (Java) — the field is not required. So: this product's entry;
// else a lone entry that names no product; else none. Never another product's entry (its balance, its whitelist).
import type { OpResponse } from './operations.ts';

export type BalanceEntry = NonNullable<OpResponse<'ProxyInfo'>['list']>[number];

export function balanceEntry(list: readonly BalanceEntry[] | null | undefined, productNo: string): BalanceEntry | undefined {
  const entries = list ?? [];
  const own = entries.find((e) => e.productNo === productNo);
  if (own) return own;
  const only = entries.length === 1 ? entries[0]! : undefined;
  return only && (only.productNo === undefined || only.productNo === null || only.productNo === '') ? only : undefined;
}
