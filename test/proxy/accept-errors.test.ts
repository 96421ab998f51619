// A failed accept (EMFILE, ENFILE, ENOBUFS: Node emits 'error' on the listening server) must not take the
// daemon down: the listener logs it and keeps serving.
import assert from 'node:assert/strict';
import type { EventEmitter } from 'node:events';
import { connect } from 'node:net';
import { describe, test } from 'node:test';
import { HttpListener } from '../../src/proxy/http.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { Router } from '../../src/proxy/router.ts';
import { Socks5Listener } from '../../src/proxy/socks5.ts';
import { captureLogger } from '../support/logger.ts';
import { MapSessions, routerWithoutNodes, Users, user } from './fixtures.ts';

function firstBytes(port: number, send: Buffer | string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('error', reject);
    s.once('data', (d: Buffer) => {
      s.destroy();
      resolve(d);
    });
    s.write(send);
  });
}

describe('a failed accept on a listening server', () => {
  for (const kind of ['socks5', 'http'] as const) {
    test(`${kind}: logged, not thrown; the listener still serves`, async () => {
      const { logger, text } = captureLogger('warn');
      const router = routerWithoutNodes();
      const listener = kind === 'socks5' ? new Socks5Listener({ router, port: 0, logger }) : new HttpListener({ router, port: 0, logger });
      const { port } = await listener.listen();
      try {
        const server = (listener as unknown as { server: EventEmitter }).server;
        assert.doesNotThrow(() => server.emit('error', Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', syscall: 'accept' })));
        assert.match(text(), /could not accept a connection/);
        assert.match(text(), /EMFILE/);
        const reply =
          kind === 'socks5'
            ? await firstBytes(port, Buffer.from([5, 1, 2]))
            : await firstBytes(port, 'GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n');
        if (kind === 'socks5') assert.deepEqual([...reply], [5, 2]);
        else assert.match(reply.toString(), /^HTTP\/1\.1 407/);
      } finally {
        await listener.close();
      }
    });
  }
});

describe('an unexpected failure while dialing (a defect, not an upstream failure)', () => {
  for (const kind of ['socks5', 'http'] as const) {
    test(`${kind}: the client is answered and closed, nothing is left unhandled`, async () => {
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown): void => {
        unhandled.push(reason);
      };
      process.on('unhandledRejection', onUnhandled);
      const meters = new UnlimitedMeters();
      const router = new Router({
        users: new Users([user('alice', 'alice-pass')]),
        meters,
        pools: {
          pool: () => {
            throw new TypeError('a defect in the pool registry');
          },
        },
        sessions: new MapSessions(),
      });
      const listener = kind === 'socks5' ? new Socks5Listener({ router, port: 0 }) : new HttpListener({ router, port: 0 });
      const { port } = await listener.listen();
      try {
        const answer = await new Promise<Buffer>((resolve, reject) => {
          const s = connect({ host: '127.0.0.1', port });
          const parts: Buffer[] = [];
          s.once('error', reject);
          s.on('data', (d: Buffer) => parts.push(d));
          s.once('close', () => resolve(Buffer.concat(parts)));
          if (kind === 'http') {
            s.write(
              `CONNECT 127.0.0.1:9 HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from('alice:alice-pass').toString('base64')}\r\n\r\n`,
            );
          } else {
            s.write(Buffer.from([5, 1, 2]));
            s.write(Buffer.concat([Buffer.from([1, 5]), Buffer.from('alice'), Buffer.from([10]), Buffer.from('alice-pass')]));
            s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, 0, 9]));
          }
        });
        if (kind === 'socks5')
          assert.deepEqual([...answer.subarray(-10, -8)], [5, 1]); // general failure
        else assert.match(answer.toString(), /^HTTP\/1\.1 500 /);
        await new Promise((r) => setTimeout(r, 50));
        assert.deepEqual(unhandled, []);
        assert.equal(meters.usage('alice').active, 0);
      } finally {
        process.off('unhandledRejection', onUnhandled);
        await listener.close();
      }
    });
  }
});
