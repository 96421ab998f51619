// One plain-HTTP client connection's requests, one at a time. node:http parses pipelined requests as fast as
// they arrive and would hand every one to the listener at once; forwarded together they would all be in
// flight upstream, each reading its response into memory, past the user's rate and connection cap. Here a
// connection has one request in flight: the next starts once the previous response has been written to the
// client (its 'close', which follows node's 'finish': the last byte handed to the kernel), as an HTTP/1.1
// origin may. Up to `depth` requests wait behind it; the next one is answered 503 with Connection: close and
// those after it are never started (node closes the connection after that answer). The lane only keeps the
// order: the listener watches the response in flight and, when it closes, takes the next request from here
// (Lane.done) and starts it itself.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { slotIf, slotOf } from '../wire/socket-slot.ts';

/** A request waiting its turn. */
export interface Waiting {
  req: IncomingMessage;
  res: ServerResponse;
  expectContinue: boolean;
}

// A client connection's lane is its socket's slot's `lane` (wire/socket-slot.ts); a response's, a symbol.
const LANE = Symbol('rotor.lane');
type LaneResponse = ServerResponse & { [LANE]?: Lane | undefined };

/** What became of a request that just arrived. */
export type Arrival = 'start' | 'queued' | 'overflow' | 'ignore';

export class Lane {
  /** A request is in flight (started, its response not yet written). */
  private busy = false;
  /** Past the depth: answered 503 and closing; later requests are never started. */
  private closing = false;
  /** Made when a second request arrives while one is in flight (rare: most clients never pipeline). */
  private waiting: Waiting[] | null = null;

  private constructor(private readonly client: Socket) {}

  /** The lane of `client` (made on its first request). */
  static of(client: Socket): Lane {
    const slot = slotOf(client);
    return (slot.lane ??= new Lane(client)) as Lane;
  }

  /** Whether `client` has a plain-HTTP request in flight or waiting. */
  static busy(client: Socket): boolean {
    const lane = slotIf(client)?.lane as Lane | undefined;
    return lane !== undefined && (lane.busy || (lane.waiting !== null && lane.waiting.length > 0));
  }

  /**
   * The response `res` of the request in flight is written (or gone): the lane is free, or held by the next
   * waiting request, which is returned for the caller to start. Undefined when `res` holds no lane (already
   * done) or nobody waits.
   */
  static done(res: ServerResponse): Waiting | undefined {
    const r = res as LaneResponse;
    const lane = r[LANE];
    if (lane === undefined) return undefined;
    r[LANE] = undefined;
    return lane.next();
  }

  /**
   * A request arrived: 'start' (it holds the lane now; the caller starts it and calls done(res) when its
   * response closes), 'queued' (done() hands it back later), 'overflow' (the queue is full: the caller answers
   * it 503, the connection closes after), or 'ignore' (the connection is closing: never started, never answered).
   */
  arrive(req: IncomingMessage, res: ServerResponse, expectContinue: boolean, depth: number): Arrival {
    if (this.closing) return 'ignore';
    if (!this.busy) {
      this.hold(res);
      return 'start';
    }
    const waiting = (this.waiting ??= []);
    if (waiting.length >= depth) {
      this.closing = true;
      return 'overflow';
    }
    waiting.push({ req, res, expectContinue });
    return 'queued';
  }

  private hold(res: ServerResponse): void {
    this.busy = true;
    (res as LaneResponse)[LANE] = this;
  }

  private next(): Waiting | undefined {
    this.busy = false;
    const waiting = this.waiting;
    if (waiting === null || waiting.length === 0) return undefined;
    if (this.client.destroyed) {
      waiting.length = 0;
      return undefined;
    }
    const w = waiting.shift()!;
    this.hold(w.res);
    return w;
  }
}
