// A SOCKS5 UDP client for tests (RFC 1928 §7, with RFC 1929 authentication): UDP ASSOCIATE over a TCP control
// connection, datagrams with the SOCKS5 UDP header to the relay address the reply names, answers collected.
import assert from 'node:assert/strict';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect, type Socket } from 'node:net';
import { parseUdpHeader, udpHeader } from '../../src/wire/socks5-udp.ts';

/** Bytes read from a control socket and not yet consumed (the answers may arrive together). */
const leftovers = new WeakMap<Socket, Buffer>();

/** Reads exactly `n` bytes from `s` (rejects if it closes first). */
function readExact(s: Socket, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = leftovers.get(s) ?? Buffer.alloc(0);
    const check = (): boolean => {
      if (buf.length < n) return false;
      leftovers.set(s, buf.subarray(n));
      resolve(buf.subarray(0, n));
      return true;
    };
    if (check()) return;
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c]);
      if (check()) cleanup();
    };
    const onEnd = (): void => {
      cleanup();
      reject(new Error(`closed after ${buf.length} of ${n} bytes`));
    };
    const cleanup = (): void => {
      s.off('data', onData);
      s.off('close', onEnd);
    };
    s.on('data', onData);
    s.on('close', onEnd);
  });
}

export interface Association {
  control: Socket;
  relay: { host: string; port: number };
  udp: UdpSocket;
  /** Datagrams received: source (from the header), payload, and when (Date.now()). */
  received: Array<{ host: string; port: number; payload: string; at: number }>;
  send(payload: Buffer | string, to: { host: string; port: number }): void;
  close(): void;
}

/** The SOCKS5 client: greeting, RFC 1929, UDP ASSOCIATE; resolves with the reply code (0 = associated). */
export async function associate(port: number, user: string, pass: string): Promise<{ reply: number; a?: Association }> {
  const control = connect({ host: '127.0.0.1', port });
  await new Promise<void>((r, j) => control.once('connect', r).once('error', j));
  control.write(Buffer.from([5, 1, 2]));
  assert.deepEqual([...(await readExact(control, 2))], [5, 2]);
  const u = Buffer.from(user);
  const p = Buffer.from(pass);
  control.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
  assert.deepEqual([...(await readExact(control, 2))], [1, 0]);
  control.write(Buffer.from([5, 3, 0, 1, 0, 0, 0, 0, 0, 0]));
  const head = await readExact(control, 4);
  if (head[1] !== 0) {
    control.destroy();
    return { reply: head[1]! };
  }
  assert.equal(head[3], 1, 'an IPv4 relay address for an IPv4 control connection');
  const rest = await readExact(control, 6);
  const relay = { host: `${rest[0]}.${rest[1]}.${rest[2]}.${rest[3]}`, port: rest.readUInt16BE(4) };
  const udp = createSocket('udp4');
  await new Promise<void>((r) => udp.bind(0, '127.0.0.1', r));
  const received: Association['received'] = [];
  udp.on('message', (msg) => {
    const h = parseUdpHeader(msg);
    if ('error' in h) return;
    received.push({ host: h.host, port: h.port, payload: msg.subarray(h.length).toString(), at: Date.now() });
  });
  control.on('error', () => undefined);
  return {
    reply: 0,
    a: {
      control,
      relay,
      udp,
      received,
      send(payload, to) {
        udp.send(Buffer.concat([udpHeader(to.host, to.port)!, Buffer.from(payload)]), relay.port, relay.host);
      },
      close() {
        control.destroy();
        try {
          udp.close();
        } catch {
          // closed already
        }
      },
    },
  };
}
