// A min-heap (tinyqueue) of (time, name): what comes due first is on top. The users directory keeps its users' expiries in
// one, so the once-a-second expiry round looks at the top instead of walking 10,000 users. Entries are never
// updated in place: a changed time is pushed again and the stale entry is told apart when it comes out
// (the caller compares with the user's current time).
import TinyQueue from 'tinyqueue';

export interface Due {
  at: number;
  name: string;
}

const earlierFirst = (a: Due, b: Due): number => a.at - b.at;

export class DueQueue {
  private readonly heap = new TinyQueue<Due>([], earlierFirst);

  get size(): number {
    return this.heap.length;
  }

  push(at: number, name: string): void {
    this.heap.push({ at, name });
  }

  /** Removes and returns every entry whose time is at or before `now`, earliest first. */
  popDue(now: number): Due[] {
    const out: Due[] = [];
    for (let top = this.heap.peek(); top !== undefined && top.at <= now; top = this.heap.peek()) out.push(this.heap.pop()!);
    return out;
  }
}
