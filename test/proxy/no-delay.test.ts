// TCP_NODELAY on real sockets: a listener started by listenOn carries it on its listening socket, so the sockets
// it accepts have it from the kernel and the accept path calls nothing per connection; a listener that does not
// carry it still gets it set on every accepted socket. Read back with getsockopt on the real descriptors.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import { ListenerConnections } from '../../src/proxy/connections.ts';
import { listenOn } from '../../src/proxy/listen.ts';

const sockopt = createRequire(import.meta.url)('sockopt') as { getsockopt(s: unknown, level: number, name: number): number };
const nodelay = (s: Socket | Server): number => sockopt.getsockopt(s, 6, 1);

describe('TCP_NODELAY from the listening socket', { skip: process.platform !== 'linux' }, () => {
  const servers: Server[] = [];
  const clients: Socket[] = [];
  after(() => {
    for (const c of clients) c.destroy();
    for (const s of servers) s.close();
  });

  /** A server whose accepted sockets go through ListenerConnections.accept; `listen` starts it. */
  async function accepting(listen: (server: Server) => Promise<number>): Promise<{ server: Server; next(): Promise<Socket> }> {
    const conns = new ListenerConnections();
    const accepted: Socket[] = [];
    const setNoDelayCalls: boolean[] = [];
    const server = createServer((s) => {
      const own = s.setNoDelay.bind(s);
      s.setNoDelay = (on?: boolean) => {
        setNoDelayCalls.push(on ?? true);
        return own(on);
      };
      conns.accept(s, 'test', undefined);
      accepted.push(s);
      server.emit('accepted-one');
    });
    servers.push(server);
    const port = await listen(server);
    return {
      server: Object.assign(server, { setNoDelayCalls }),
      async next(): Promise<Socket> {
        const want = accepted.length + 1;
        clients.push(connect(port, '127.0.0.1'));
        while (accepted.length < want) await once(server, 'accepted-one');
        return accepted[want - 1]!;
      },
    };
  }

  test('a listener started by listenOn carries it; its accepted sockets have it with no call of their own', async () => {
    const { server, next } = await accepting(async (s) => (await listenOn(s, 0)).port);
    assert.equal(nodelay(server), 1, 'the listening socket carries TCP_NODELAY');
    const sockets = [await next(), await next(), await next()];
    for (const s of sockets) assert.equal(nodelay(s), 1);
    assert.deepEqual((server as Server & { setNoDelayCalls: boolean[] }).setNoDelayCalls, [], 'no setNoDelay per accepted socket');
  });

  test('a listener that does not carry it: every accepted socket is set on its own', async () => {
    const { server, next } = await accepting(async (s) => {
      s.listen(0, '127.0.0.1');
      await once(s, 'listening');
      return (s.address() as AddressInfo).port;
    });
    assert.equal(nodelay(server), 0);
    const sockets = [await next(), await next()];
    for (const s of sockets) assert.equal(nodelay(s), 1);
    assert.deepEqual((server as Server & { setNoDelayCalls: boolean[] }).setNoDelayCalls, [true, true]);
  });
});
