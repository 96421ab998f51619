// While an upstream is being dialed, the client socket must keep being read: a paused socket never sees
// the client's FIN, so a client that gives up would hold a dial (and a pool slot) until its deadline. Bytes
// the client pipelines meanwhile are kept (bounded) and handed to the relay as the head.
import type { Socket } from 'node:net';

const MAX_HELD_BYTES = 64 * 1024;

/**
 * Reads `socket` until released; `onGone` runs once if the client ends, closes or fails first. Returns the
 * release function: it pauses the socket (unless `keepReading`: the caller attaches its reader, the relay,
 * in the same turn, so no chunk can be missed and no resume is paid), detaches, and gives back `head` plus
 * everything held.
 */
export function holdClient(socket: Socket, head: Buffer | null, onGone: () => void): (keepReading?: boolean) => Buffer | null {
  const held: Buffer[] = head && head.length > 0 ? [head] : [];
  let size = head?.length ?? 0;
  const onData = (chunk: Buffer): void => {
    held.push(chunk);
    size += chunk.length;
    // Enough: stop reading (the client is not waiting for our answer anyway).
    if (size >= MAX_HELD_BYTES) socket.pause();
  };
  const gone = (): void => {
    detach();
    onGone();
  };
  const detach = (): void => {
    socket.off('data', onData);
    socket.off('end', gone);
    socket.off('close', gone);
    socket.off('error', gone);
  };
  socket.on('data', onData);
  // on(), not once(): detach() removes them all when the first fires (once() would wrap each in a new function).
  socket.on('end', gone);
  socket.on('close', gone);
  socket.on('error', gone);
  // Already flowing when the handshake left it so (acceptSocks5 keepReading): then this costs nothing.
  socket.resume();
  return (keepReading = false) => {
    if (!keepReading) socket.pause();
    detach();
    if (held.length === 0) return null;
    return held.length === 1 ? held[0]! : Buffer.concat(held, size);
  };
}
