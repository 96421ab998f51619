// The simulator's clock. Platform time (order processing, expiry, callback backoff, flow-log minutes) runs
// on this clock so tests can speed it up or jump it forward instead of waiting.

export interface SimClock {
  /** Platform time in epoch milliseconds. */
  now(): number;
  /** Runs fn after `ms` of platform time; returns a cancel function. */
  schedule(ms: number, fn: () => void): () => void;
  /** Platform seconds per real second (default 1). */
  setSpeed(speed: number): void;
  readonly speed: number;
  /** Jumps platform time forward, running every task that falls due, in order. */
  advance(ms: number): void;
  /** Cancels every pending task (on close). */
  stop(): void;
}

const MAX_TIMER_MS = 2_147_483_647;

interface Task {
  due: number;
  fn: () => void;
  timer: NodeJS.Timeout | null;
}

export interface ClockOptions {
  speed?: number;
  /** Platform time at start, epoch ms (default: the real time). */
  start?: number;
}

export function createClock(options: ClockOptions = {}): SimClock {
  let speed = options.speed && options.speed > 0 ? options.speed : 1;
  // Platform time = anchor + (real elapsed since realAnchor) × speed; re-anchored on every speed change.
  let anchor = options.start ?? Date.now();
  let realAnchor = Date.now();
  const tasks = new Set<Task>();

  const now = () => anchor + (Date.now() - realAnchor) * speed;

  const arm = (task: Task) => {
    if (task.timer) clearTimeout(task.timer);
    // setTimeout fires at once above 2^31-1 ms; long waits (instance expiry months ahead) re-arm instead
    const wait = Math.min(MAX_TIMER_MS, Math.max(0, (task.due - now()) / speed));
    task.timer = setTimeout(() => (task.due > now() ? arm(task) : run(task)), Math.ceil(wait));
    task.timer.unref?.();
  };
  const run = (task: Task) => {
    if (!tasks.delete(task)) return;
    if (task.timer) clearTimeout(task.timer);
    task.fn();
  };

  return {
    now,
    get speed() {
      return speed;
    },
    schedule(ms, fn) {
      const task: Task = { due: now() + Math.max(0, ms), fn, timer: null };
      tasks.add(task);
      arm(task);
      return () => {
        if (task.timer) clearTimeout(task.timer);
        tasks.delete(task);
      };
    },
    setSpeed(next) {
      if (!(next > 0)) return;
      anchor = now();
      realAnchor = Date.now();
      speed = next;
      for (const t of tasks) arm(t);
    },
    advance(ms) {
      anchor += Math.max(0, ms);
      const due = [...tasks].filter((t) => t.due <= now()).sort((a, b) => a.due - b.due);
      for (const t of due) run(t);
      for (const t of tasks) arm(t);
    },
    stop() {
      for (const t of tasks) if (t.timer) clearTimeout(t.timer);
      tasks.clear();
    },
  };
}
