// What a dial needs of an AbortSignal (AbortSignal fits it), and a cheap implementation: an AbortController with
// its EventTarget costs ~10 us per connection; this costs a field. An upstream dial hands a DialCancel its socket
// instead of a listener: abort() destroys it (a node object, no dialer code called), and the dial, seeing its
// socket close with the cancel aborted, ends with DialAbortedError.

/** A function, or an object whose handleEvent() is called (as EventTarget does): no closure per listener. */
export type AbortListener = (() => void) | { handleEvent(): void };

/** The part of AbortSignal the dialers use. */
export interface DialSignal {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: AbortListener, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: AbortListener): void;
}

/** A one-shot cancel flag with abort listeners; `abort()` runs each listener once. */
export class DialCancel implements DialSignal {
  aborted = false;
  /** The upstream socket of the dial this cancel stops, while it runs (upstream-dial.ts, warm.ts set it). */
  socket: { destroy(): void } | null = null;
  /** The oldest listener (a dial has one: its race's), in a field: no array grown per tunnel. */
  private first: AbortListener | null = null;
  /** Any others, in the order added (all younger than `first`). */
  private listeners: AbortListener[] | null = null;

  addEventListener(_type: 'abort', listener: AbortListener): void {
    if (this.aborted) return;
    const list = this.listeners;
    if (this.first === null && (list === null || list.length === 0)) this.first = listener;
    else if (list === null) this.listeners = [listener];
    else list.push(listener);
  }

  removeEventListener(_type: 'abort', listener: AbortListener): void {
    if (this.first === listener) {
      this.first = null;
      return;
    }
    const list = this.listeners;
    if (!list) return;
    const i = list.indexOf(listener);
    if (i >= 0) list.splice(i, 1);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const socket = this.socket;
    this.socket = null;
    socket?.destroy();
    const first = this.first;
    const list = this.listeners;
    this.first = null;
    this.listeners = null;
    if (first !== null) call(first);
    if (list === null) return;
    for (const listener of list) call(listener);
  }
}

function call(listener: AbortListener): void {
  if (typeof listener === 'function') listener();
  else listener.handleEvent();
}
