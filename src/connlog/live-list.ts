// The live connections, oldest first, as a list threaded through the connections themselves (each holds its
// neighbours): adding and removing write a few fields and allocate nothing.
//
// Why not a Map: a long-lived Map's hash table sits in V8's old generation, and every rehash (which steady
// adds and deletes cause every few dozen entries) allocates the next table there too and leaves the previous
// one behind with the entries it held, until the next full collection. Each young-generation collection
// takes those stale entries as roots, so every connection listed at some rehash, and all it references (a
// forwarded request's exchange: its node:http request and response, headers and buffers), was copied and then
// promoted instead of dying young: about 5 KB per plain-HTTP request, 35 % of all it allocates
// (docs/benchmarks.md, "M1 survivors"). A removed entry here keeps no reference to its neighbours, and the
// list keeps none to it.

/** What the list threads through: set and cleared by the list only (an item is in one list at most). */
export interface Listed<T> {
  prevLive: T | null;
  nextLive: T | null;
}

export class LiveList<T extends Listed<T>> {
  private head: T | null = null;
  private tail: T | null = null;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Appends `item` (the newest). It must not be in a list already. */
  add(item: T): void {
    item.prevLive = this.tail;
    item.nextLive = null;
    if (this.tail === null) this.head = item;
    else this.tail.nextLive = item;
    this.tail = item;
    this.count++;
  }

  /** The oldest item, or null. */
  get first(): T | null {
    return this.head;
  }

  /** Takes `item` out, which then keeps no link to its neighbours; false when it was not in this list. */
  remove(item: T): boolean {
    const { prevLive: prev, nextLive: next } = item;
    if (prev === null) {
      if (this.head !== item) return false;
      this.head = next;
    } else prev.nextLive = next;
    if (next === null) this.tail = prev;
    else next.prevLive = prev;
    item.prevLive = null;
    item.nextLive = null;
    this.count--;
    return true;
  }

  /** The first item (oldest first) for which `match` holds. */
  find(match: (item: T) => boolean): T | undefined {
    for (let c = this.head; c !== null; c = c.nextLive) if (match(c)) return c;
    return undefined;
  }

  /** Oldest first; the item just yielded may be removed before the walk goes on. */
  *[Symbol.iterator](): IterableIterator<T> {
    let c = this.head;
    while (c !== null) {
      const next = c.nextLive;
      yield c;
      c = next;
    }
  }
}
