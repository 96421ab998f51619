// The open connections of each user, oldest first, threaded through the connections as the live list is
// (live-list.ts says why not a Set per user): the portal's poll of one customer's live list walks that customer's
// connections, not every open connection of the daemon. A connection joins its user's list when its user is set
// (after the handshake: a login, or the user a refusal is about) and leaves it at its end; a user's entry is there
// while it has an open connection, so the table is bounded by the open connections.

/** A connection as the per-user lists hold it: the recorder's context extends it (its `user` is this accessor). */
export class UserListed {
  /** Neighbours in its user's list, while it is open and has a user. */
  prevOfUser: UserListed | null = null;
  nextOfUser: UserListed | null = null;
  private who: string | null = null;
  /** Ended: its user may still be set (a late refusal) but it joins no list. */
  private gone = false;

  constructor(
    /** Its place in the order connections were opened: a user's list keeps that order. */
    readonly seq: number,
    private readonly lists: OpenByUser,
  ) {}

  get user(): string | null {
    return this.who;
  }

  /** Set once per connection (admitted, or refused): an open one moves to its user's list. */
  set user(name: string | null) {
    if (name === this.who) return;
    if (!this.gone) this.lists.move(this, this.who, name);
    this.who = name;
  }

  /** The connection ended: it leaves its user's list. */
  leaveUserList(): void {
    if (this.gone) return;
    this.gone = true;
    if (this.who !== null) this.lists.move(this, this.who, null);
  }
}

/** One user's open connections, oldest first. */
class UserOpen {
  head: UserListed | null = null;
  tail: UserListed | null = null;
  count = 0;

  /** In open order: from the tail back past those opened later (a user is known after the handshake). */
  add(c: UserListed): void {
    let after = this.tail;
    while (after !== null && after.seq > c.seq) after = after.prevOfUser;
    const before = after === null ? this.head : after.nextOfUser;
    c.prevOfUser = after;
    c.nextOfUser = before;
    if (after === null) this.head = c;
    else after.nextOfUser = c;
    if (before === null) this.tail = c;
    else before.prevOfUser = c;
    this.count++;
  }

  remove(c: UserListed): void {
    const { prevOfUser: prev, nextOfUser: next } = c;
    if (prev === null) this.head = next;
    else prev.nextOfUser = next;
    if (next === null) this.tail = prev;
    else next.prevOfUser = prev;
    c.prevOfUser = null;
    c.nextOfUser = null;
    this.count--;
  }
}

/** Every user's list of open connections (one entry per user with one open). */
export class OpenByUser {
  private readonly lists = new Map<string, UserOpen>();

  /** Users with an open connection. */
  get size(): number {
    return this.lists.size;
  }

  /** The oldest open connection of `user` (then nextOfUser), or null. */
  first(user: string): UserListed | null {
    return this.lists.get(user)?.head ?? null;
  }

  /** `c` leaves `from`'s list (when not null) and joins `to`'s (when not null). */
  move(c: UserListed, from: string | null, to: string | null): void {
    if (from !== null) {
      const mine = this.lists.get(from);
      if (mine !== undefined) {
        mine.remove(c);
        if (mine.count === 0) this.lists.delete(from);
      }
    }
    if (to !== null) {
      let mine = this.lists.get(to);
      if (mine === undefined) {
        mine = new UserOpen();
        this.lists.set(to, mine);
      }
      mine.add(c);
    }
  }
}
