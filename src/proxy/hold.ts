// While an upstream is being dialed, the client socket must keep being read: a paused socket never sees
// the client's FIN, so a client that gives up would hold a dial (and a pool slot) until its deadline. Bytes
// the client pipelines meanwhile are kept (bounded) and handed to the relay as the head.
//
// One Hold object per dial and the same three module-level listeners for every socket (they find their Hold
// on the socket): no closure per connection. A hold released to the relay in the same turn hands it these
// listeners as they are (the relay reads the client through them: HeldReader), instead of three taken off and
// three put on again per tunnel (~3.7 k instructions, most of them node's stream code, docs/benchmarks.md).
import type { Socket } from 'node:net';

const MAX_HELD_BYTES = 64 * 1024;

const HOLD = Symbol('rotor.hold');
/** Set when a release handed the listeners over (until the reader takes them), then the reader itself. */
const READER = Symbol('rotor.heldReader');
type HeldSocket = Socket & { [HOLD]?: Hold | undefined; [READER]?: HeldReader | typeof HANDED | undefined };
const HANDED = 0;

/** What reads a client after its hold, through the hold's listeners ('data', 'end', 'close'): the relay. */
export interface HeldReader {
  clientData(chunk: Buffer): void;
  clientEnd(): void;
  closed(socket: Socket): void;
}

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
    socket.on('end', onHeldEnd);
    socket.on('close', onHeldClose);
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
    socket.off('end', onHeldEnd);
    socket.off('close', onHeldClose);
  }

  /**
   * `handOver`: the caller starts the client's reader (takeHeldListeners) in this same turn, and the listeners
   * stay on the socket for it; until then they do nothing (a client that left meanwhile is the caller's to see).
   */
  release(keepReading = false, handOver = false): Buffer | null {
    if (!keepReading) this.socket.pause();
    if (handOver && (this.socket as HeldSocket)[HOLD] === this) {
      const socket = this.socket as HeldSocket;
      socket[HOLD] = undefined;
      socket[READER] = HANDED;
    } else this.detach();
    const held = this.held;
    const head = this.head !== null && this.head.length > 0 ? this.head : null;
    if (held === null) return head;
    if (head !== null) held.unshift(head);
    return held.length === 1 ? held[0]! : Buffer.concat(held, this.size);
  }
}

/**
 * The reader takes the listeners a release handed over (true), or there are none on `socket` (false: it adds its
 * own). From here they call `reader`.
 */
export function takeHeldListeners(socket: Socket, reader: HeldReader): boolean {
  const s = socket as HeldSocket;
  if (s[READER] !== HANDED) return false;
  s[READER] = reader;
  return true;
}

// The hold's listeners, and the reader's once handed over (the reader takes them off with these same functions).
export function onHeldData(this: HeldSocket, chunk: Buffer): void {
  const reader = this[READER];
  if (reader !== undefined && reader !== HANDED) reader.clientData(chunk);
  else this[HOLD]?.data(chunk);
}

export function onHeldEnd(this: HeldSocket): void {
  const reader = this[READER];
  if (reader !== undefined && reader !== HANDED) reader.clientEnd();
  else gone(this);
}

export function onHeldClose(this: HeldSocket): void {
  const reader = this[READER];
  if (reader !== undefined && reader !== HANDED) reader.closed(this);
  else gone(this);
}

function gone(socket: HeldSocket): void {
  const hold = socket[HOLD];
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
