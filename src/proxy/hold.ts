// While an upstream is being dialed, the client socket must keep being read: a paused socket never sees
// the client's FIN, so a client that gives up would hold a dial (and a pool slot) until its deadline. Bytes
// the client pipelines meanwhile are kept (bounded) and handed to the relay as the head.
//
// One Hold object per dial and the same four module-level listeners for every socket (they find their Hold
// on the socket): no closure per connection.
import type { Socket } from 'node:net';

const MAX_HELD_BYTES = 64 * 1024;

const HOLD = Symbol('rotor.hold');
type HeldSocket = Socket & { [HOLD]?: Hold | undefined };

/** Told once when the client ends or closes (a failure closes it) before the hold is released (a DialCancel fits). */
export interface HoldWatcher {
  abort(): void;
}

/**
 * Reads `socket` until released; `watcher.abort()` runs once if the client ends, closes or fails first.
 * release() pauses the socket (unless `keepReading`: the caller attaches its reader, the relay, in the same
 * turn, so no chunk can be missed and no resume is paid), detaches, and gives back `head` plus everything held.
 */
export class Hold {
  private held: Buffer[] | null = null;
  private size: number;

  constructor(
    private readonly socket: Socket,
    private readonly head: Buffer | null,
    readonly watcher: HoldWatcher,
  ) {
    this.size = head?.length ?? 0;
    (socket as HeldSocket)[HOLD] = this;
    socket.on('data', onHeldData);
    // on(), not once(): detach() removes them all when the first fires (once() would wrap each in a new function).
    // No 'error' listener: a socket destroys itself on an error and 'close' follows, and every accepted socket
    // carries the listener's own error guard (ListenerConnections.accept): one listener fewer per connection.
    socket.on('end', onHeldGone);
    socket.on('close', onHeldGone);
    // Already flowing when the handshake left it so (acceptSocks5 keepReading): then this costs nothing.
    socket.resume();
  }

  data(chunk: Buffer): void {
    (this.held ??= []).push(chunk);
    this.size += chunk.length;
    // Enough: stop reading (the client is not waiting for our answer anyway).
    if (this.size >= MAX_HELD_BYTES) this.socket.pause();
  }

  detach(): void {
    const socket = this.socket as HeldSocket;
    if (socket[HOLD] !== this) return;
    socket[HOLD] = undefined;
    socket.off('data', onHeldData);
    socket.off('end', onHeldGone);
    socket.off('close', onHeldGone);
  }

  release(keepReading = false): Buffer | null {
    if (!keepReading) this.socket.pause();
    this.detach();
    const held = this.held;
    const head = this.head !== null && this.head.length > 0 ? this.head : null;
    if (held === null) return head;
    if (head !== null) held.unshift(head);
    return held.length === 1 ? held[0]! : Buffer.concat(held, this.size);
  }
}

function onHeldData(this: HeldSocket, chunk: Buffer): void {
  this[HOLD]?.data(chunk);
}

function onHeldGone(this: HeldSocket): void {
  const hold = this[HOLD];
  if (hold === undefined) return;
  hold.detach();
  hold.watcher.abort();
}

/** holdClient's callback as a watcher. */
class GoneCallback implements HoldWatcher {
  constructor(readonly abort: () => void) {}
}

/** The same as a Hold, with a callback and a release function (for callers that hold once in a while). */
export function holdClient(socket: Socket, head: Buffer | null, onGone: () => void): (keepReading?: boolean) => Buffer | null {
  const hold = new Hold(socket, head, new GoneCallback(onGone));
  return (keepReading) => hold.release(keepReading);
}
