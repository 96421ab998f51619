// Rotor's own slots on a socket (each module's state for the shared listeners that find it there, no closure per
// socket), all reserved at once when the socket is accepted or dialed. A property added to an object changes its
// hidden class; slots added stage by stage (accepted, in the handshake, held, relayed; opening, ready, requested)
// gave sockets some ten hidden classes, and node's net and stream code, which reads every socket, turned
// megamorphic on them (a stub-cache lookup per property read). With every slot reserved up front a socket keeps
// one hidden class through its life, as the minimal gateway's sockets do (docs/benchmarks.md, "One hidden class
// per socket").
import type { Socket } from 'node:net';

/** connections.ts: the socket's entry among the open connections. */
export const OPEN = Symbol('rotor.openSocket');
/** socks5.ts: the SOCKS5 client connection in its handshake. */
export const SOCKS5_CLIENT = Symbol('rotor.socks5Client');
/** http-forward.ts: a forwarded client's state, and an upstream connection's. */
export const FORWARDED = Symbol('rotor.forwarded');
export const UPSTREAM = Symbol('rotor.upstream');
/** upstream-dial.ts: the dial a socket belongs to. */
export const DIAL = Symbol('rotor.upstreamDial');
/** warm.ts: a warm connection's opening, readiness, owner and the request on it. */
export const OPENING = Symbol('rotor.warmOpening');
export const READY = Symbol('rotor.warmReady');
export const OWNER = Symbol('rotor.warmOwner');
export const REQUEST = Symbol('rotor.warmRequest');
/** hold.ts: the hold of a client's bytes while its tunnel dials. */
export const HOLD = Symbol('rotor.hold');
/** relay.ts: the relay a socket belongs to. */
export const RELAY = Symbol('rotor.relay');
/** paced-reads.ts: reads paced by the writer's drain, and a bulk tunnel's sink. */
export const PACED = Symbol('rotor.paced');
export const BULK = Symbol('rotor.bulk');

type Slots = Record<symbol, unknown>;

/**
 * Adds every slot (undefined) to a socket Rotor just accepted or dialed, always in this order, before any module
 * sets one: setting a slot afterwards changes a value, not the socket's hidden class. Call once per socket.
 */
export function reserveSlots(socket: Socket): void {
  const s = socket as unknown as Slots;
  s[OPEN] = undefined;
  s[SOCKS5_CLIENT] = undefined;
  s[FORWARDED] = undefined;
  s[UPSTREAM] = undefined;
  s[DIAL] = undefined;
  s[OPENING] = undefined;
  s[READY] = undefined;
  s[OWNER] = undefined;
  s[REQUEST] = undefined;
  s[HOLD] = undefined;
  s[RELAY] = undefined;
  s[PACED] = undefined;
  s[BULK] = undefined;
}
