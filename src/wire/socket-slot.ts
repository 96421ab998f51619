// One property on a socket for every module's own state on it. Node's socket and stream code (Socket._read,
// Readable.on, writeOrBuffer, onStreamRead, ...) reads its fields from each socket through inline caches shared by
// every socket of the process; each property added to a socket gives it a new hidden class, so a socket that had
// a module's symbol set at each stage of its life (accepted, the open connections' entry, the handshake, the
// dial's hold, the relay; a warm connection's opening, readiness, owner and request) reached those sites under
// nine classes or more, past V8's four: every such load ran through the megamorphic stub cache. Here a socket
// gets one slot, the first time any module asks, holding one object of a fixed shape with every module's field:
// a module sets its field, never a property of the socket, and the socket keeps its class (docs/benchmarks.md,
// "One slot per socket"). Fields are `unknown` because the modules whose state they hold sit above this one;
// each module reads its own field through its own typed accessor.
//
// In wire/ (the lowest folder that handles sockets) so that wire/socks5.ts's handshake uses it as proxy/ does.

export const SLOT = Symbol('rotor.slot');

/** Every module's field on a socket, all present from the start (one hidden class). */
export class SocketSlot {
  /** proxy/http.ts: the listener's state of an accepted client connection. */
  accepted: unknown = undefined;
  /** proxy/connections.ts: the open connections' entry. */
  open: unknown = undefined;
  /** proxy/socks5.ts: the SOCKS5 listener's connection. */
  socks5: unknown = undefined;
  /** wire/socks5.ts: the server handshake's steps. */
  handshake: unknown = undefined;
  /** proxy/hold.ts: the dial's hold, and whether its release handed its listeners over. */
  hold: unknown = undefined;
  handed = false;
  /** proxy/relay.ts: the relay. */
  relay: unknown = undefined;
  /** proxy/upstream-dial.ts: the guarded dial. */
  dial: unknown = undefined;
  /** proxy/warm.ts: a warm connection's opening, readiness, owner and request. */
  warmOpening: unknown = undefined;
  warmReady: unknown = undefined;
  warmOwner: unknown = undefined;
  warmRequest: unknown = undefined;
  /** proxy/http-lane.ts: a plain-HTTP client connection's lane. */
  lane: unknown = undefined;
  /** proxy/paced-reads.ts: paced reads on, and a bulk read's sink. */
  paced = false;
  bulk: unknown = undefined;
}

type Slotted = { [SLOT]?: SocketSlot };

/** `socket`'s slot, made on the first call. */
export function slotOf(socket: object): SocketSlot {
  const s = socket as Slotted;
  return s[SLOT] ?? (s[SLOT] = new SocketSlot());
}

/** `socket`'s slot if a module made one. */
export function slotIf(socket: object): SocketSlot | undefined {
  return (socket as Slotted)[SLOT];
}
