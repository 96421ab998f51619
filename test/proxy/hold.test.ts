import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ConnectionLog } from '../../src/connlog/recorder.ts';
import { DialCancel } from '../../src/proxy/cancel.ts';
import { Hold } from '../../src/proxy/hold.ts';

const EVENTS = ['data', 'end', 'close', 'error'] as const;

function listeners(socket: Socket): number[] {
  return EVENTS.map((e) => socket.listenerCount(e));
}

describe('a client held while its upstream is dialed (one Hold object, no closure per connection)', () => {
  let server: Server;
  const accepted: Socket[] = [];
  let waiting: ((s: Socket) => void) | undefined;
  before(async () => {
    server = createServer({ allowHalfOpen: true, pauseOnConnect: true }, (s) => {
      accepted.push(s);
      waiting?.(s);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
  });
  const clients: Socket[] = [];
  after(() => {
    for (const s of [...accepted, ...clients]) s.destroy();
    server.close();
  });

  /** A client connection and the server's side of it. */
  async function pair(): Promise<{ client: Socket; served: Socket }> {
    const got = new Promise<Socket>((resolve) => (waiting = resolve));
    const client = connect((server.address() as { port: number }).port, '127.0.0.1');
    clients.push(client);
    await once(client, 'connect');
    return { client, served: await got };
  }

  test('bytes the client sends meanwhile come back behind the head; release leaves no listener behind', async () => {
    const { client, served } = await pair();
    const before = listeners(served);
    let aborted = 0;
    const hold = new Hold(served, Buffer.from('head-'), { abort: () => aborted++ });
    client.write('early');
    await once(served, 'data');
    const held = hold.release();
    assert.equal(held?.toString(), 'head-early');
    assert.deepEqual(listeners(served), before);
    assert.equal(served.isPaused(), true);
    // Read again (a paused socket never sees the FIN): the end reaches only the caller's own listener.
    served.resume();
    client.end();
    await once(served, 'end');
    assert.equal(aborted, 0, 'a released hold tells no one of the end');
    served.destroy();
  });

  test("the watcher's abort runs once when the client leaves; a DialCancel is such a watcher", async () => {
    const { client, served } = await pair();
    const cancel = new DialCancel();
    let handled = 0;
    cancel.addEventListener('abort', { handleEvent: () => handled++ });
    const hold = new Hold(served, null, cancel);
    client.end();
    await once(served, 'end');
    assert.equal(cancel.aborted, true);
    assert.equal(handled, 1, "an object listener's handleEvent runs once");
    assert.equal(hold.release(true), null);
    assert.deepEqual(listeners(served).slice(0, 1), [0], 'no data listener is left once the client left');
  });

  test("a client reset while held aborts the watcher once, through 'close' alone (the hold adds no 'error' listener)", async () => {
    const { client, served } = await pair();
    // The listener's own guard, as ListenerConnections.accept adds it: an error never goes unheard.
    served.on('error', () => {});
    // Not once(served, 'close'): it rejects on the 'error' that comes first.
    const closed = new Promise((resolve) => served.on('close', resolve));
    const before = listeners(served);
    let aborted = 0;
    const hold = new Hold(served, null, { abort: () => aborted++ });
    assert.equal(served.listenerCount('error'), before[3], 'one error listener fewer to add and remove per tunnel');
    client.resetAndDestroy();
    await closed;
    assert.equal(aborted, 1);
    assert.equal(hold.release(true), null);
    assert.deepEqual(listeners(served), before, 'nothing of the hold is left on the socket');
  });

  test("DELETE /v1/connections/:id reaches a closer object's stop() (a relay's handle)", () => {
    const log = new ConnectionLog();
    const conn = log.open('socks5', '127.0.0.1');
    let stopped = 0;
    conn.closer = { stop: () => stopped++ };
    assert.equal(log.kill(conn.id), true);
    assert.equal(stopped, 1);
    conn.end({ result: 'ok', reason: 'killed' });
  });
});
