// proxy.clientUnsentBytes on real sockets: every accepted client socket carries TCP_NOTSENT_LOWAT, and once a
// listener has accepted one, its listening socket carries it too, so the kernel copies it into every socket it
// accepts there (no setsockopt per connection). Read back with getsockopt on the real descriptors.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import { relay } from '../../src/proxy/relay.ts';
import { BULK_UNSENT, unsentLimiter } from '../../src/proxy/unsent-limit.ts';
import { UnlimitedMeters } from '../support/meters.ts';

const sockopt = createRequire(import.meta.url)('sockopt') as { getsockopt(s: unknown, level: number, name: number): number };
const TCP_NOTSENT_LOWAT = 25;
const lowat = (s: Socket | Server): number => sockopt.getsockopt(s, 6, TCP_NOTSENT_LOWAT);

describe('unsent bound (TCP_NOTSENT_LOWAT)', { skip: process.platform !== 'linux' }, () => {
  const servers: Server[] = [];
  const clients: Socket[] = [];
  after(() => {
    for (const c of clients) c.destroy();
    for (const s of servers) s.close();
  });

  /** A listener whose accepted sockets go through `limit`; resolves each accepted socket in order. */
  async function listener(limit: (s: Socket) => void): Promise<{ server: Server; next(): Promise<Socket> }> {
    const accepted: Socket[] = [];
    const server = createServer((s) => {
      limit(s);
      accepted.push(s);
      server.emit('accepted-one');
    });
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    return {
      server,
      async next(): Promise<Socket> {
        const want = accepted.length + 1;
        clients.push(connect(port, '127.0.0.1'));
        while (accepted.length < want) await once(server, 'accepted-one');
        return accepted[want - 1]!;
      },
    };
  }

  test('every accepted socket is bounded; after the first, the listening socket is too (inherited at accept)', async () => {
    const { limit } = unsentLimiter(96 * 1024);
    assert.ok(limit, 'sockopt loads on Linux');
    let calls = 0;
    const { server, next } = await listener((s) => {
      calls++;
      limit(s);
    });
    const first = await next();
    assert.equal(lowat(first), 96 * 1024);
    assert.equal(lowat(server), 96 * 1024, 'the listening socket carries the bound after its first accept');
    // A socket the kernel accepts now has it from the listener, whatever the per-socket call does.
    const second = await next();
    assert.equal(lowat(second), 96 * 1024);
    assert.equal(calls, 2);
  });

  test('a listener never passed through the limiter keeps the kernel default', async () => {
    const { server, next } = await listener(() => undefined);
    const s = await next();
    assert.equal(lowat(server), lowat(s));
    assert.notEqual(lowat(s), 96 * 1024);
  });

  test('0 bytes: no limiter at all', () => {
    assert.deepEqual(unsentLimiter(0), {});
  });

  test('a relay raises the bound while its client takes a bulk download, and puts it back once a write waits', async () => {
    const { limit } = unsentLimiter(128 * 1024);
    const toClient = await listener(limit!);
    const client = await toClient.next(); // the relay's client socket (bounded)
    const app = clients[clients.length - 1]!; // the application's end of it
    const toUpstream = await listener(() => undefined);
    const far = await toUpstream.next(); // the upstream's end
    const near = clients[clients.length - 1]!; // the relay's upstream socket
    const ended = new Promise((resolve) =>
      relay(client, near, { meter: new UnlimitedMeters().meter('u'), idleTimeoutMs: 30_000, end: { relayEnded: resolve } }),
    );
    const chunk = Buffer.alloc(1 << 20, 7);
    let got = 0;
    const taken = new Promise<void>((resolve) =>
      app.on('data', (d: Buffer) => {
        got += d.length;
        if (got >= 4 << 20) resolve();
      }),
    );
    // The application reads 4 MiB as fast as it can: more than it could hold unread.
    assert.equal(lowat(client), 128 * 1024);
    for (let i = 0; i < 4; i++) if (!far.write(chunk)) await once(far, 'drain');
    await taken;
    assert.equal(lowat(client), BULK_UNSENT, 'raised while the client drains');
    // It stops reading: the upstream goes on until the relay's write to the client waits.
    app.pause();
    await until(() => {
      if (client.writableNeedDrain) return true;
      if (far.writableLength < 1 << 20) far.write(chunk);
      return false;
    });
    assert.equal(lowat(client), 128 * 1024, 'the bound again once a write waits');
    far.destroy();
    app.destroy();
    await ended;
  });
});

/** Resolves on the first turn of the event loop on which `ready()` holds. */
function until(ready: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => void (ready() ? resolve() : setImmediate(check));
    check();
  });
}
