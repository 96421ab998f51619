// UDP ASSOCIATE (RFC 1928 §7) on the sandbox's SOCKS5 upstreams, as a real provider's gateway offers it: a UDP
// socket bound on the connection's exit address (so targets see the same exit as over TCP, sticky sessions
// included), datagrams from the client relayed to their DST with the header stripped, answers wrapped in a
// header naming their source and sent back to the client, every byte charged to the grant's meter. The
// association ends with its TCP connection.
import { createSocket, type RemoteInfo, type Socket as UdpSocket } from 'node:dgram';
import { isIPv6, type Socket } from 'node:net';
import { REPLY, writeReply } from '../../wire/socks5.ts';
import { parseUdpHeader, udpHeader } from '../../wire/socks5-udp.ts';
import type { Meter } from '../contracts.ts';

/** Answers the UDP ASSOCIATE on `control` and relays until it closes. */
export function serveUdpAssociate(control: Socket, exit: string, meter: Meter, clientIp: string): void {
  const udp: UdpSocket = createSocket({ type: isIPv6(exit) ? 'udp6' : 'udp4' });
  let client: { address: string; port: number } | undefined;
  let over = false;
  const stop = (): void => {
    if (over) return;
    over = true;
    try {
      udp.close();
    } catch {
      // already closed
    }
    control.destroy();
  };
  udp.on('error', stop);
  udp.on('message', (msg: Buffer, from: RemoteInfo) => {
    if (over) return;
    const fromClient = client ? from.address === client.address && from.port === client.port : sameHost(from.address, clientIp);
    if (fromClient) {
      client ??= { address: from.address, port: from.port };
      const h = parseUdpHeader(msg);
      if ('error' in h || h.frag !== 0) return;
      const payload = msg.subarray(h.length);
      if (!meter.add(payload.length)) return stop();
      // A send that fails (an unreachable or forbidden address) loses that datagram only, as UDP would.
      udp.send(payload, h.port, h.host, noop);
      return;
    }
    if (!client) return;
    const header = udpHeader(from.address, from.port);
    if (!header) return;
    if (!meter.add(msg.length)) return stop();
    udp.send([header, msg], client.port, client.address, noop);
  });
  control.on('error', stop);
  control.on('close', stop);
  control.on('end', stop);
  udp.bind(0, exit, () => {
    if (over) return;
    const a = udp.address();
    writeReply(control, REPLY.succeeded, { host: a.address, port: a.port });
    // The control connection carries nothing more; reading it is how its end is seen.
    control.resume();
  });
}

function noop(): void {}

function sameHost(a: string, b: string): boolean {
  const bare = (x: string): string => (x.startsWith('::ffff:') ? x.slice(7) : x);
  return bare(a) === bare(b);
}
