// One plain-HTTP client connection's requests, one at a time. node:http parses pipelined requests as fast as
// they arrive and would hand every one to the listener at once; forwarded together they would all be in
// flight upstream, each reading its response into memory, past the user's rate and connection cap. Here a
// connection has one request in flight: the next starts once the previous response has been written to the
// client (its 'close', which follows node's 'finish': the last byte handed to the kernel), as an HTTP/1.1
// origin may. Up to `depth` requests wait behind it; the next one is answered 503 with Connection: close and
// those after it are never started (node closes the connection after that answer).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** Starts a request now (the listener's admission and forwarding). */
export type StartRequest = (req: IncomingMessage, res: ServerResponse, expectContinue: boolean) => void;

interface Waiting {
  req: IncomingMessage;
  res: ServerResponse;
  expectContinue: boolean;
}

const LANE = Symbol('rotor.lane');
type LaneSocket = Socket & { [LANE]?: Lane };
type LaneResponse = ServerResponse & { [LANE]?: Lane };

/** What became of a request that just arrived. */
export type Arrival = 'start' | 'queued' | 'overflow' | 'ignore';

export class Lane {
  /** A request is in flight (started, its response not yet written). */
  private busy = false;
  /** Past the depth: answered 503 and closing; later requests are never started. */
  private closing = false;
  /** Made when a second request arrives while one is in flight (rare: most clients never pipeline). */
  private waiting: Waiting[] | null = null;

  private constructor(
    private readonly client: Socket,
    private readonly start: StartRequest,
  ) {}

  /** The lane of `client` (made on its first request). */
  static of(client: Socket, start: StartRequest): Lane {
    const s = client as LaneSocket;
    return (s[LANE] ??= new Lane(client, start));
  }

  /** Whether `client` has a plain-HTTP request in flight or waiting. */
  static busy(client: Socket): boolean {
    const lane = (client as LaneSocket)[LANE];
    return lane !== undefined && (lane.busy || (lane.waiting !== null && lane.waiting.length > 0));
  }

  /**
   * A request arrived: 'start' (it holds the lane now; the caller starts it), 'queued' (started later by the
   * lane), 'overflow' (the queue is full: the caller answers it 503, the connection closes after), or
   * 'ignore' (the connection is closing: never started, never answered).
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
    res.on('close', responseClosed);
  }

  /** The response in flight is written (or gone): the next waiting request starts. */
  next(): void {
    this.busy = false;
    const waiting = this.waiting;
    if (waiting === null || waiting.length === 0) return;
    if (this.client.destroyed) {
      waiting.length = 0;
      return;
    }
    const w = waiting.shift()!;
    this.hold(w.res);
    this.start(w.req, w.res, w.expectContinue);
  }
}

function responseClosed(this: LaneResponse): void {
  const lane = this[LANE];
  if (lane === undefined) return;
  this[LANE] = undefined;
  lane.next();
}
