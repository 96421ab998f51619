// The body hold of a request rule with a body pattern (src/proxy/request-rules.ts): the response's head and
// its first body bytes wait here, before any byte of them goes to the client, so that a rule the body fires
// can still send the request through another exit. At most `limit` bytes plus the one read that crosses it
// are held per response (a client connection has one response in flight: http-lane.ts). The decision is
// made synchronously inside the 'data' (or 'end') event, so the stream the caller then attaches sees the
// very next chunk and nothing is lost. Only responses a body rule may fire pass here.
import type { IncomingMessage } from 'node:http';

/** Called once with the bytes held; `ended` = they are the whole body. */
export type BodyDecision = (held: Buffer, ended: boolean) => void;

const HOLD = Symbol('rotor.bodyHold');
type Held = IncomingMessage & { [HOLD]: BodyHold };

class BodyHold {
  readonly chunks: Buffer[] = [];
  bytes = 0;
  done = false;

  constructor(
    readonly limit: number,
    readonly decide: BodyDecision,
    readonly lost: () => void,
  ) {}
}

/**
 * Holds `answer`'s first `limit` body bytes (all of a shorter body), then calls `decide`. `lost` is called
 * instead when the response ends early (the upstream closed during the body) before a decision.
 */
export function holdBody(answer: IncomingMessage, limit: number, decide: BodyDecision, lost: () => void): void {
  (answer as Held)[HOLD] = new BodyHold(limit, decide, lost);
  answer.on('data', heldData);
  answer.on('end', heldEnd);
  answer.on('close', heldClose);
}

function release(answer: Held, ended: boolean): void {
  const hold = answer[HOLD];
  hold.done = true;
  answer.off('data', heldData);
  answer.off('end', heldEnd);
  answer.off('close', heldClose);
  hold.decide(hold.chunks.length === 1 ? hold.chunks[0]! : Buffer.concat(hold.chunks, hold.bytes), ended);
}

function heldData(this: Held, chunk: Buffer): void {
  const hold = this[HOLD];
  hold.chunks.push(chunk);
  hold.bytes += chunk.length;
  if (hold.bytes >= hold.limit) release(this, false);
}

function heldEnd(this: Held): void {
  release(this, true);
}

function heldClose(this: Held): void {
  const hold = this[HOLD];
  if (hold.done) return;
  hold.done = true;
  this.off('data', heldData);
  this.off('end', heldEnd);
  hold.lost();
}
