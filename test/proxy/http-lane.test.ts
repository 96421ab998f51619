// A plain-HTTP connection's lane keeps its requests in order and starts none itself: the first holds it, the
// next wait up to the depth (then one overflow, then ignored), and when the response in flight is done the
// lane hands the next waiting request back to the listener (Lane.done) instead of calling the listener.
// Real node objects (an unconnected socket, its IncomingMessage and ServerResponse); the end-to-end order over
// real sockets is test/e2e/abuse-pipelining's.
import assert from 'node:assert/strict';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { test } from 'node:test';
import { Lane } from '../../src/proxy/http-lane.ts';

function request(socket: Socket): { req: IncomingMessage; res: ServerResponse } {
  const req = new IncomingMessage(socket);
  return { req, res: new ServerResponse(req) };
}

test('the first request holds the lane; the others wait their turn and are handed back in order by done()', () => {
  const client = new Socket();
  const lane = Lane.of(client);
  assert.equal(Lane.of(client), lane, 'one lane per connection');
  const [a, b, c, d, e] = [1, 2, 3, 4, 5].map(() => request(client));
  assert.equal(lane.arrive(a!.req, a!.res, false, 2), 'start');
  assert.equal(Lane.busy(client), true);
  assert.equal(lane.arrive(b!.req, b!.res, true, 2), 'queued');
  assert.equal(lane.arrive(c!.req, c!.res, false, 2), 'queued');
  assert.equal(lane.arrive(d!.req, d!.res, false, 2), 'overflow');
  assert.equal(lane.arrive(e!.req, e!.res, false, 2), 'ignore');

  const next = Lane.done(a!.res);
  assert.deepEqual(next && [next.req, next.res, next.expectContinue], [b!.req, b!.res, true]);
  assert.equal(Lane.done(a!.res), undefined, 'a response is done once');
  assert.equal(Lane.done(b!.res)?.req, c!.req);
  assert.equal(Lane.busy(client), true, 'held by the last one started');
  assert.equal(Lane.done(c!.res), undefined, 'nobody waits');
  assert.equal(Lane.busy(client), false);
});

test('a connection gone meanwhile: its waiting requests are dropped, never handed back', () => {
  const client = new Socket();
  const lane = Lane.of(client);
  const [a, b] = [1, 2].map(() => request(client));
  assert.equal(lane.arrive(a!.req, a!.res, false, 4), 'start');
  assert.equal(lane.arrive(b!.req, b!.res, false, 4), 'queued');
  client.destroy();
  assert.equal(Lane.done(a!.res), undefined);
  assert.equal(Lane.busy(client), false);
});
