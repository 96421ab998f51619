// A min-heap of (time, name): what comes due first is on top. The users directory keeps its users' expiries in
// one, so the once-a-second expiry round looks at the top instead of walking 10,000 users. Entries are never
// updated in place: a changed time is pushed again and the stale entry is told apart when it comes out
// (the caller compares with the user's current time).
export interface Due {
  at: number;
  name: string;
}

export class DueQueue {
  private readonly heap: Due[] = [];

  get size(): number {
    return this.heap.length;
  }

  push(at: number, name: string): void {
    const h = this.heap;
    h.push({ at, name });
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.at <= h[i]!.at) break;
      [h[parent], h[i]] = [h[i]!, h[parent]!];
      i = parent;
    }
  }

  /** Removes and returns every entry whose time is at or before `now`, earliest first. */
  popDue(now: number): Due[] {
    const out: Due[] = [];
    while (this.heap.length > 0 && this.heap[0]!.at <= now) out.push(this.pop());
    return out;
  }

  private pop(): Due {
    const h = this.heap;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let least = i;
        if (l < h.length && h[l]!.at < h[least]!.at) least = l;
        if (r < h.length && h[r]!.at < h[least]!.at) least = r;
        if (least === i) break;
        [h[least], h[i]] = [h[i]!, h[least]!];
        i = least;
      }
    }
    return top;
  }
}
