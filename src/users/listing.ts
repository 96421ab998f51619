// GET /v1/users at 100,000 users: one page costs the event loop a few milliseconds, not a sort of every name.
//
// Names are kept sorted (NameIndex): a single creation or deletion is a binary search and one splice; a burst
// (an import, the start) marks the index stale and the next read sorts once. A page in name order is a binary
// search to its first name (`after`, `prefix`) and a walk of at most the prefix's range. Usage order
// (`sort=usage`: usedBytes descending, then name) has no index to keep (usage moves with every chunk): each
// page is a bounded selection over the users after the cursor — one pass, a heap of `limit` entries. A pass
// over many names (usage order, filters) yields to the event loop every few thousand names, so a read of
// 100,000 users never holds the proxy's connections for more than a few milliseconds at a time.
// The cursor is opaque to clients: the last name for name order, `<usedBytes>:<name>` for usage order.

export type UserSort = 'name' | 'usage';

export interface PageQuery {
  prefix?: string | undefined;
  limit: number;
  after?: string | undefined;
  sort?: UserSort | undefined;
}

export interface PageSource {
  /** Whether `keep` can say no (else every name in range is listed). */
  filtered: boolean;
  /** False when the user is filtered out. */
  keep(name: string): boolean;
  usedBytes(name: string): number;
}

export interface Page {
  names: string[];
  next: string | null;
  total: number;
}

/** Default and largest page (docs/reference.md "Users at scale"). */
export const PAGE_DEFAULT = 100;
export const PAGE_MAX = 1_000;

/** Names looked at between two yields to the event loop. */
const SLICE = 1_024;

const yieldNow = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Below this many pending changes an index is patched in place; above, re-sorted on the next read. */
const PATCH_MAX = 64;

export class NameIndex {
  private sorted: string[] = [];
  private stale = false;
  private pending = 0;

  constructor(private readonly names: () => Iterable<string>) {}

  added(name: string): void {
    if (this.stale) return;
    if (++this.pending > PATCH_MAX) {
      this.stale = true;
      return;
    }
    const i = lowerBound(this.sorted, name);
    if (this.sorted[i] !== name) this.sorted.splice(i, 0, name);
  }

  removed(name: string): void {
    if (this.stale) return;
    if (++this.pending > PATCH_MAX) {
      this.stale = true;
      return;
    }
    const i = lowerBound(this.sorted, name);
    if (this.sorted[i] === name) this.sorted.splice(i, 1);
  }

  /** Every name, ascending (do not modify). */
  all(): readonly string[] {
    if (this.stale) {
      this.sorted = [...this.names()].sort(compare);
      this.stale = false;
    }
    this.pending = 0;
    return this.sorted;
  }

  /** Marks the index for a full rebuild (a load of many users). */
  invalidate(): void {
    this.stale = true;
  }
}

/** Plain code-unit order (what `sort()` gives strings): the order cursors compare in. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function lowerBound(sorted: readonly string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The range of names starting with `prefix` ([from, to) in `sorted`). */
function prefixRange(sorted: readonly string[], prefix: string): [number, number] {
  if (prefix === '') return [0, sorted.length];
  const from = lowerBound(sorted, prefix);
  // Every name with the prefix sorts before prefix + U+FFFF (names are ASCII).
  const to = lowerBound(sorted, `${prefix}\uffff`);
  return [from, to];
}

/** One page of `index` under `query`; `keep` filters and counts `total` over the prefix's whole range. */
export async function pageOf(index: NameIndex, source: PageSource, query: PageQuery): Promise<Page> {
  const prefix = query.prefix ?? '';
  if (query.sort === 'usage') return byUsage(index, prefix, source, query);
  if (source.filtered) return byNameFiltered(index, prefix, source, query);
  const sorted = index.all();
  const [from, to] = prefixRange(sorted, prefix);
  return byName(sorted, from, to, query);
}

/**
 * Visits the names of the prefix's range in order, yielding to the event loop every SLICE names. After a yield
 * it goes on after the last name visited, in the index as it is then: a user created or deleted meanwhile (the
 * index's array is patched in place) neither repeats a name nor skips one, as going on by position did.
 */
async function walk(index: NameIndex, prefix: string, visit: (name: string) => void): Promise<void> {
  let sorted = index.all();
  let [i, to] = prefixRange(sorted, prefix);
  let n = 0;
  while (i < to) {
    const name = sorted[i++]!;
    visit(name);
    if (++n % SLICE === 0 && i < to) {
      await yieldNow();
      sorted = index.all();
      to = prefixRange(sorted, prefix)[1];
      i = upperBound(sorted, name);
    }
  }
}

/** No filter: the page is a slice and the count the range's length. */
function byName(sorted: readonly string[], from: number, to: number, query: PageQuery): Page {
  const start = query.after === undefined ? from : Math.max(from, upperBound(sorted, query.after));
  const end = Math.min(to, start + query.limit);
  const names = sorted.slice(start, end);
  return { names, next: end < to && names.length > 0 ? names[names.length - 1]! : null, total: to - from };
}

async function byNameFiltered(index: NameIndex, prefix: string, source: PageSource, query: PageQuery): Promise<Page> {
  const names: string[] = [];
  let total = 0;
  let next: string | null = null;
  const after = query.after;
  await walk(index, prefix, (name) => {
    if (!source.keep(name)) return;
    total++;
    if (after !== undefined && name <= after) return;
    if (names.length < query.limit) names.push(name);
    else next ??= names[names.length - 1]!;
  });
  return { names, next, total };
}

function upperBound(sorted: readonly string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** `<usedBytes>:<name>` → its parts; undefined when malformed. */
export function parseUsageCursor(cursor: string): { used: number; name: string } | undefined {
  const colon = cursor.indexOf(':');
  if (colon <= 0) return undefined;
  const used = Number(cursor.slice(0, colon));
  if (!Number.isSafeInteger(used) || used < 0) return undefined;
  return { used, name: cursor.slice(colon + 1) };
}

/** a before b in usage order: more bytes first, then the name. */
function usageBefore(aUsed: number, aName: string, bUsed: number, bName: string): boolean {
  return aUsed !== bUsed ? aUsed > bUsed : aName < bName;
}

async function byUsage(index: NameIndex, prefix: string, source: PageSource, query: PageQuery): Promise<Page> {
  const cursor = query.after === undefined ? undefined : parseUsageCursor(query.after);
  // A max-heap on usage order (its root is the last of the `limit` best found so far).
  const heapUsed: number[] = [];
  const heapName: string[] = [];
  const limit = query.limit;
  let total = 0;
  let more = false;
  const swap = (i: number, j: number): void => {
    const u = heapUsed[i]!;
    heapUsed[i] = heapUsed[j]!;
    heapUsed[j] = u;
    const n = heapName[i]!;
    heapName[i] = heapName[j]!;
    heapName[j] = n;
  };
  // "worse" = later in usage order; the root is the worst kept.
  const worse = (i: number, j: number): boolean => usageBefore(heapUsed[j]!, heapName[j]!, heapUsed[i]!, heapName[i]!);
  await walk(index, prefix, (name) => {
    if (source.filtered && !source.keep(name)) return;
    total++;
    const used = source.usedBytes(name);
    if (cursor !== undefined && !usageBefore(cursor.used, cursor.name, used, name)) return;
    if (heapName.length < limit) {
      heapUsed.push(used);
      heapName.push(name);
      let c = heapName.length - 1;
      while (c > 0) {
        const p = (c - 1) >> 1;
        if (!worse(c, p)) break;
        swap(c, p);
        c = p;
      }
      return;
    }
    more = true;
    if (!usageBefore(used, name, heapUsed[0]!, heapName[0]!)) return;
    heapUsed[0] = used;
    heapName[0] = name;
    let p = 0;
    for (;;) {
      const l = 2 * p + 1;
      const r = l + 1;
      let w = p;
      if (l < heapName.length && worse(l, w)) w = l;
      if (r < heapName.length && worse(r, w)) w = r;
      if (w === p) break;
      swap(p, w);
      p = w;
    }
  });
  const order = heapName.map((name, i) => ({ name, used: heapUsed[i]! }));
  order.sort((a, b) => (usageBefore(a.used, a.name, b.used, b.name) ? -1 : 1));
  const last = order[order.length - 1];
  return { names: order.map((o) => o.name), next: more && last !== undefined ? `${last.used}:${last.name}` : null, total };
}
