// While an upstream is being dialed, the client socket must keep being read: a paused socket never sees
// the client's FIN, so a client that gives up would hold a dial (and a pool slot) until its deadline. Bytes
// the client pipelines meanwhile are kept (bounded) and handed to the relay as the head.
//
// One Hold object per dial and the same module-level listeners for every socket (they find their Hold on the
// socket): no closure per connection. A tunnel's hold is given its reader's listeners (the relay's, which call
// heldData and heldGone here until the relay starts): a release that hands them over leaves them on the socket,
// instead of three taken off and the same three kinds put on again by the relay in the same turn (~3.7 k
// instructions per tunnel, most of them node's stream code, docs/benchmarks.md).
import type { Socket } from 'node:net';
import { slotIf, slotOf } from '../wire/socket-slot.ts';

const MAX_HELD_BYTES = 64 * 1024;

/**
 * A socket's hold is its slot's `hold` (wire/socket-slot.ts); the slot's `handed` is set on a socket whose release
 * handed its listeners over, until the reader takes them (takeHandedListeners).
 */
function holdOf(socket: Socket): Hold | undefined {
  return slotIf(socket)?.hold as Hold | undefined;
}

/** A reader's listeners for a held socket ('data', 'end', 'close'), each calling heldData / heldGone while held. */
export interface HoldListeners {
  data: (this: Socket, chunk: Buffer) => void;
  end: (this: Socket) => void;
  close: (this: Socket) => void;
}

/** The hold's own (a hold nobody reads after: the admission's). */
const OWN: HoldListeners = { data: onHeldData, end: onHeldGone, close: onHeldGone };

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
    /** The reader's listeners, to hand over at release (see release's handOver); default the hold's own. */
    private readonly listeners: HoldListeners = OWN,
  ) {
    this.size = head?.length ?? 0;
    slotOf(socket).hold = this;
    socket.on('data', listeners.data);
    // on(), not once(): detach() removes them all when the first fires (once() would wrap each in a new function).
    // No 'error' listener: a socket destroys itself on an error and 'close' follows, and every accepted socket
    // carries the listener's own error guard (ListenerConnections.accept): one listener fewer per connection.
    socket.on('end', listeners.end);
    socket.on('close', listeners.close);
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
    const socket = this.socket;
    const slot = slotIf(socket);
    if (slot === undefined || slot.hold !== this) return;
    slot.hold = undefined;
    const { listeners } = this;
    socket.off('data', listeners.data);
    socket.off('end', listeners.end);
    socket.off('close', listeners.close);
  }

  /**
   * `handOver`: the reader whose listeners the hold was given starts in this same turn (takeHandedListeners) and
   * they stay on the socket for it; until it starts they find no hold and do nothing.
   */
  release(keepReading = false, handOver = false): Buffer | null {
    if (!keepReading) this.socket.pause();
    const slot = slotIf(this.socket);
    if (handOver && this.listeners !== OWN && slot !== undefined && slot.hold === this) {
      slot.hold = undefined;
      slot.handed = true;
    } else this.detach();
    const held = this.held;
    const head = this.head !== null && this.head.length > 0 ? this.head : null;
    if (held === null) return head;
    if (head !== null) held.unshift(head);
    return held.length === 1 ? held[0]! : Buffer.concat(held, this.size);
  }
}

function onHeldData(this: Socket, chunk: Buffer): void {
  holdOf(this)?.data(chunk);
}

function onHeldGone(this: Socket): void {
  heldGone(this);
}

/** A held socket's chunk, from its reader's 'data' listener before the reader starts. */
export function heldData(socket: Socket, chunk: Buffer): void {
  holdOf(socket)?.data(chunk);
}

/** A held socket's 'end' or 'close', from its reader's listener before the reader starts: the watcher is told once. */
export function heldGone(socket: Socket): void {
  const hold = holdOf(socket);
  if (hold === undefined) return;
  hold.detach();
  hold.watcher.abort();
}

/** Whether a release handed `socket`'s listeners over (the reader then adds none of its own); the reader takes them. */
export function takeHandedListeners(socket: Socket): boolean {
  const slot = slotIf(socket);
  if (slot === undefined || !slot.handed) return false;
  slot.handed = false;
  return true;
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
