// Users added, changed or removed (through the API, a reload, or another daemon of a fleet), told to every
// component that keeps something per user. Each component subscribes to what it needs: at once (pools, the
// router's credential view), or once per burst of changes for work that is O(users) (10,000 creations are not
// 10,000 rebuilds of a list).

export type UserChangeListener = (names: readonly string[], removed: readonly string[]) => void;

/** What changed over one burst. `whole`: a reload, which names nobody: every user may have changed. */
export interface UserChangeBurst {
  readonly changed: ReadonlySet<string>;
  readonly removed: ReadonlySet<string>;
  readonly whole: boolean;
}

export class UserChanges {
  private readonly listeners: UserChangeListener[] = [];
  private readonly bursts: Burst[] = [];

  /** Called for each change as it happens, off the data path. */
  on(listener: UserChangeListener): void {
    this.listeners.push(listener);
  }

  /** Called once per burst: `delayMs` after the first change of a burst, with everything the burst changed. */
  onBurst(delayMs: number, listener: (burst: UserChangeBurst) => void): void {
    this.bursts.push(new Burst(delayMs, listener));
  }

  /** The directory's change callback. No names at all means a reload: everyone. */
  readonly emit = (names: readonly string[], removed: readonly string[]): void => {
    for (const l of this.listeners) l(names, removed);
    for (const b of this.bursts) b.add(names, removed);
  };

  close(): void {
    for (const b of this.bursts) b.cancel();
  }
}

class Burst {
  private timer: NodeJS.Timeout | undefined;
  private changed = new Set<string>();
  private removed = new Set<string>();
  private whole = false;

  constructor(
    private readonly delayMs: number,
    private readonly listener: (burst: UserChangeBurst) => void,
  ) {}

  add(names: readonly string[], removed: readonly string[]): void {
    for (const n of names) this.changed.add(n);
    for (const n of removed) this.removed.add(n);
    if (names.length === 0 && removed.length === 0) this.whole = true;
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const burst = { changed: this.changed, removed: this.removed, whole: this.whole };
      this.changed = new Set();
      this.removed = new Set();
      this.whole = false;
      this.listener(burst);
    }, this.delayMs);
    this.timer.unref();
  }

  cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
