// RFC 1928 §7: the header of a UDP datagram relayed by a SOCKS5 server,
//   RSV(2) FRAG(1) ATYP(1) DST.ADDR DST.PORT DATA
// parsed without copying (the address as text, the data as a view) and written in front of a payload. Shared
// by Rotor's UDP relay (src/proxy/udp-*.ts) and the sandbox's upstreams. Every malformed header is a typed
// result, never an exception: datagrams come from the network.
import { isIPv6 } from 'node:net';
import { ipv4Value, ipv6Bytes } from './ip-bytes.ts';

export interface UdpHeader {
  /** FRAG: 0 = a whole datagram; anything else is a fragment (Rotor drops those, as §7 allows). */
  frag: number;
  host: string;
  port: number;
  /** The header's length: the payload starts here. */
  length: number;
}

/** A datagram's header, or a one-word reason it is malformed. */
export function parseUdpHeader(d: Buffer): UdpHeader | { error: string } {
  if (d.length < 4) return { error: 'short' };
  if (d[0] !== 0 || d[1] !== 0) return { error: 'reserved bytes not zero' };
  const frag = d[2]!;
  const atyp = d[3];
  let host: string;
  let end: number;
  if (atyp === 0x01) {
    end = 10;
    if (d.length < end) return { error: 'short' };
    host = `${d[4]}.${d[5]}.${d[6]}.${d[7]}`;
  } else if (atyp === 0x04) {
    end = 22;
    if (d.length < end) return { error: 'short' };
    const parts: string[] = [];
    for (let i = 0; i < 8; i++) parts.push(d.readUInt16BE(4 + i * 2).toString(16));
    host = parts.join(':');
  } else if (atyp === 0x03) {
    if (d.length < 5) return { error: 'short' };
    const len = d[4]!;
    end = 5 + len + 2;
    if (len === 0 || d.length < end) return { error: len === 0 ? 'empty name' : 'short' };
    host = d.toString('latin1', 5, 5 + len);
    if (!/^[A-Za-z0-9._-]+$/.test(host)) return { error: 'malformed name' };
  } else {
    return { error: 'address type' };
  }
  const port = d.readUInt16BE(end - 2);
  if (port === 0) return { error: 'port 0' };
  return { frag, host, port, length: end };
}

/** The header for `host:port` (IPv4, IPv6 or a name), FRAG 0; undefined when the host cannot be encoded. */
export function udpHeader(host: string, port: number): Buffer | undefined {
  let b: Buffer;
  const v4 = ipv4Value(host);
  if (v4 >= 0) {
    b = Buffer.alloc(10);
    b[3] = 0x01;
    b.writeUInt32BE(v4, 4);
  } else if (isIPv6(host)) {
    b = Buffer.alloc(22);
    b[3] = 0x04;
    ipv6Bytes(host).copy(b, 4);
  } else {
    const n = Buffer.byteLength(host, 'latin1');
    if (n === 0 || n > 255) return undefined;
    b = Buffer.alloc(7 + n);
    b[3] = 0x03;
    b[4] = n;
    b.write(host, 5, 'latin1');
  }
  b.writeUInt16BE(port, b.length - 2);
  return b;
}
