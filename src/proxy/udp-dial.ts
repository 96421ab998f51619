// One upstream dial for a UDP association (udp-associate.ts): a SOCKS5 node's own UDP ASSOCIATE on the
// dial's TCP connection, under the same guard as every upstream dial (upstream-dial.ts). The relay address of
// the reply is kept by control socket; a node that cannot carry UDP is remembered by the dial's signal, so
// the client gets a clear 0x07 instead of a generic failure.
import type { Socket } from 'node:net';
import type { UpstreamNode } from '../pool/types.ts';
import { socks5Associate, type Socks5Client, type Socks5Credentials } from '../wire/socks5-client.ts';
import type { DialSignal } from './cancel.ts';
import type { DialOptions, Tunnel } from './dial-http.ts';
import { UDP_UNSUPPORTED } from './dial-socks5.ts';
import { UpstreamDialError } from './errors.ts';
import { dialThrough } from './upstream-dial.ts';

/** Where each upstream association's relay listens (BND of its reply), by its control socket. */
const relays = new WeakMap<Socket, { host: string; port: number }>();
/** Dials refused because the upstream carries no UDP, by the dial's signal (see `serve`). */
const noUdp = new WeakSet<DialSignal>();
export { UDP_UNSUPPORTED };
const credentials = new WeakMap<UpstreamNode, Socks5Credentials | null>();

/**
 * One upstream dial for UDP: a SOCKS5 node's UDP ASSOCIATE. An HTTP node, or a SOCKS5 node answering 0x07,
 * cannot carry UDP: that is said as the target's trait ('target_refused'), so the node is not blamed.
 */
export function dialUdpUpstream(node: UpstreamNode, options: DialOptions): Promise<Tunnel> {
  if (node.protocol !== 'socks5') {
    if (options.signal) noUdp.add(options.signal);
    return Promise.reject(new UpstreamDialError('target_refused', UDP_UNSUPPORTED));
  }
  let c = credentials.get(node);
  if (c === undefined) {
    c = node.username !== undefined ? { username: node.username, password: node.password ?? '' } : null;
    credentials.set(node, c);
  }
  const client = socks5Associate(c ?? undefined);
  return dialThrough(node, options, 'socks5', client).then(
    (tunnel) => associated(node, client, tunnel),
    (err: unknown) => {
      // A node answering 0x07 (dial-socks5.ts socks5Ended says UDP_UNSUPPORTED): remembered by the dial's signal.
      if (err instanceof UpstreamDialError && err.message === UDP_UNSUPPORTED && options.signal) noUdp.add(options.signal);
      throw err;
    },
  );
}

/** An association is up: its relay address kept by control socket. */
function associated(node: UpstreamNode, client: Socks5Client, tunnel: Tunnel): Tunnel {
  const relay = client.relay;
  if (relay === undefined) {
    tunnel.socket.destroy();
    throw new UpstreamDialError('handshake', 'no relay address');
  }
  // "Any address" in the reply: the relay is on the node's own address.
  const unspecified = relay.host === '0.0.0.0' || relay.host === '::' || /^0(:0)*$/.test(relay.host);
  relays.set(tunnel.socket, { host: unspecified ? node.host : relay.host, port: relay.port });
  return tunnel;
}

/** The relay address of an upstream association, by its control socket. */
export function relayOf(control: Socket): { host: string; port: number } | undefined {
  return relays.get(control);
}

/** Whether the dial with this signal met only upstreams that carry no UDP. */
export function refusedForUdp(signal: DialSignal): boolean {
  return noUdp.has(signal);
}
