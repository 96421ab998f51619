// UserPorts on its own: the first byte picks the listener (and the bytes reach it unread), admission is by the
// port a socket came in on and the client's address, a port in use is reported rather than thrown, a silent
// client is closed at the handshake deadline, and closing a port closes its connections.
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, test } from 'node:test';
import type { Authorization } from '../../src/proxy/router.ts';
import { UserPorts } from '../../src/users/ports.ts';
import { waitFor } from '../support/wait.ts';

/** A listener stand-in that records what it was handed and echoes the first bytes back. */
function recorder() {
  const taken: Array<{ socket: Socket; first: Buffer }> = [];
  return {
    taken,
    handleSocket(socket: Socket) {
      socket.once('data', (first: Buffer) => {
        taken.push({ socket, first });
        socket.write(first);
      });
    },
  };
}

function dial(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

describe('UserPorts', () => {
  let ports: UserPorts | undefined;
  afterEach(async () => {
    await ports?.close();
  });

  const make = (http = recorder(), socks5 = recorder(), timeoutMs = 5000) => {
    const admitted: string[] = [];
    ports = new UserPorts({
      host: '127.0.0.1',
      listeners: { http, socks5 },
      authorizeUser: (name): Authorization => {
        admitted.push(name);
        return { ok: false, kind: 'forbidden', reason: `admitted ${name}` };
      },
      handshakeTimeoutMs: timeoutMs,
    });
    return { ports, http, socks5, admitted };
  };

  test('0x05 goes to SOCKS5, anything else to HTTP, with the first bytes unread; admission by port and address', async () => {
    const { ports, http, socks5, admitted } = make();
    const report = await ports.sync([
      { name: 'alice', listen: { port: 0, allowIps: ['127.0.0.1/32'] } },
      { name: 'bob', listen: { port: 0, allowIps: ['10.0.0.0/8'] } },
      { name: 'carol' },
    ]);
    assert.deepEqual(report.opened.map((o) => o.user).sort(), ['alice', 'bob']);
    const a = await dial(ports.portOf('alice')!);
    a.write(Buffer.from([5, 1, 0]));
    const h = await dial(ports.portOf('alice')!);
    h.write('GET http://x/ HTTP/1.1\r\n');
    await waitFor(() => socks5.taken.length === 1 && http.taken.length === 1, 5000, 'both handed over');
    assert.deepEqual([...socks5.taken[0]!.first], [5, 1, 0]);
    assert.match(http.taken[0]!.first.toString(), /^GET http:\/\/x\//);
    const admission = ports.admit(socks5.taken[0]!.socket);
    assert.deepEqual(admission, { ok: false, kind: 'forbidden', reason: 'admitted alice' });
    const b = await dial(ports.portOf('bob')!);
    b.write('CONNECT x:443 HTTP/1.1\r\n');
    await waitFor(() => http.taken.length === 2, 5000, 'bob handed over');
    assert.equal(ports.admit(http.taken[1]!.socket), undefined, "127.0.0.1 is not in bob's allowIps");
    assert.deepEqual(admitted, ['alice']);
    // A socket that did not come through a user port is never admitted.
    const other = createServer();
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    const outside = await dial((other.address() as AddressInfo).port);
    assert.equal(ports.admit(outside), undefined);
    outside.destroy();
    other.close();
    for (const s of [a, h, b]) s.destroy();
  });

  test('sync: a port in use is reported; a removed listen closes the port and its connections; allowIps change in place', async () => {
    const { ports, http } = make();
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const busyPort = (busy.address() as AddressInfo).port;
    const first = await ports.sync([
      { name: 'alice', listen: { port: 0, allowIps: [] } },
      { name: 'bob', listen: { port: busyPort, allowIps: [] } },
    ]);
    assert.deepEqual(
      first.failed.map((f) => [f.user, f.port]),
      [['bob', busyPort]],
    );
    assert.match(first.failed[0]!.error, /EADDRINUSE/);
    busy.close();
    const port = ports.portOf('alice')!;
    const c = await dial(port);
    const cClosed = new Promise((r) => c.once('close', r));
    c.resume();
    c.write('GET / HTTP/1.1\r\n');
    await waitFor(() => http.taken.length === 1, 5000, 'handed over');
    assert.equal(ports.admit(http.taken[0]!.socket), undefined, 'empty allowIps: credentials only');
    await ports.sync([{ name: 'alice', listen: { port: 0, allowIps: ['127.0.0.1'] } }]);
    assert.equal(ports.portOf('alice'), port, 'same requested port: not reopened');
    assert.ok(ports.admit(http.taken[0]!.socket), 'the new allowIps apply');
    const closedReport = await ports.sync([{ name: 'alice', listen: null }]);
    assert.deepEqual(closedReport.closed, [{ user: 'alice', port }]);
    await cClosed;
    await assert.rejects(dial(port));
  });

  test("update: only the named users' ports change; a port that could not be opened is tried again", async () => {
    const { ports } = make();
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const busyPort = (busy.address() as AddressInfo).port;
    await ports.sync([
      { name: 'alice', listen: { port: 0, allowIps: [] } },
      { name: 'carol', listen: { port: 0, allowIps: [] } },
    ]);
    const alice = ports.portOf('alice')!;
    const carol = ports.portOf('carol')!;
    // bob is new, carol gone; alice is not named and keeps her port (a sync of these users would close it).
    const first = await ports.update([{ name: 'bob', listen: { port: busyPort, allowIps: [] } }], ['carol']);
    assert.deepEqual(
      first.failed.map((f) => [f.user, f.port]),
      [['bob', busyPort]],
    );
    assert.deepEqual(first.closed, [{ user: 'carol', port: carol }]);
    await assert.rejects(dial(carol));
    assert.equal(ports.portOf('alice'), alice);
    (await dial(alice)).destroy();
    // The port is free now: bob's is opened by the next update, whoever it names.
    await new Promise((r) => busy.close(r));
    const second = await ports.update([{ name: 'dave' }], []);
    assert.deepEqual(second.opened, [{ user: 'bob', port: busyPort }]);
    assert.equal(ports.portOf('bob'), busyPort);
    // Named without a listen, or as gone: closed; a third update has nothing left to retry.
    const third = await ports.update([{ name: 'alice', listen: null }], ['bob']);
    assert.deepEqual(third.closed.map((c) => c.user).sort(), ['alice', 'bob']);
    assert.deepEqual(ports.list(), []);
    assert.deepEqual(await ports.update([], []), { opened: [], closed: [], failed: [] });
  });

  test('a client that sends nothing is closed at the handshake deadline', async () => {
    const { ports } = make(recorder(), recorder(), 150);
    await ports.sync([{ name: 'alice', listen: { port: 0, allowIps: [] } }]);
    const s = await dial(ports.portOf('alice')!);
    const started = Date.now();
    await new Promise((r) => s.once('close', r));
    assert.ok(Date.now() - started >= 100);
  });
});
