// The body hold of a request rule with a body pattern (src/proxy/request-rules.ts): the response's head and
// its first body bytes wait here, before any byte of them goes to the client, so that a rule the body fires
// can still send the request through another exit. At most `limit` bytes plus the one read that crosses it
// are held per response (a client connection has one response in flight: http-lane.ts). The bytes in hand are
// judged by `judge` (the rules' patterns, on a thread of their own: request-rules-matcher.ts), which answers
// later; meanwhile the response is paused (node stops reading its socket once its own buffer is full), and the
// caller, once it has attached its stream in `decide`, resumes it. Only responses a body rule may fire pass here.
import type { IncomingMessage } from 'node:http';
import type { CompiledRule } from './request-rules.ts';

/** Judges the bytes held: calls `done` once, with the rule they fire (undefined: none). */
export type BodyJudge = (held: Buffer, done: (rule: CompiledRule | undefined) => void) => void;
/** Called once with the bytes held; `ended` = they are the whole body (else the response is paused). */
export type BodyDecision = (held: Buffer, ended: boolean, rule: CompiledRule | undefined) => void;

const HOLD = Symbol('rotor.bodyHold');
type Held = IncomingMessage & { [HOLD]: BodyHold };

class BodyHold {
  readonly chunks: Buffer[] = [];
  bytes = 0;
  done = false;

  constructor(
    readonly limit: number,
    readonly judge: BodyJudge,
    readonly decide: BodyDecision,
    readonly lost: () => void,
  ) {}
}

/**
 * Holds `answer`'s first `limit` body bytes (all of a shorter body), has `judge` judge them, then calls `decide`.
 * `lost` is called instead when the response ends early (the upstream closed during the body) before the bytes
 * were in hand.
 */
export function holdBody(answer: IncomingMessage, limit: number, judge: BodyJudge, decide: BodyDecision, lost: () => void): void {
  (answer as Held)[HOLD] = new BodyHold(limit, judge, decide, lost);
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
  // Paused until decided: no chunk is emitted to nobody while the patterns run.
  if (!ended) answer.pause();
  const held = hold.chunks.length === 1 ? hold.chunks[0]! : Buffer.concat(hold.chunks, hold.bytes);
  hold.judge(held, (rule) => hold.decide(held, ended, rule));
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
