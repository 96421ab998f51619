// IP addresses as the bytes SOCKS5 carries them (RFC 1928 ATYP 1 and 4): the CONNECT request a client sends,
// the reply a server sends, the UDP datagram header. One encoding for all three.

/**
 * A dotted-quad IPv4 address as a number, or -1 when `host` is not one as net.isIPv4 reads it (four decimal
 * octets of at most 255, none with a leading zero). One pass over the characters: every SOCKS5 request, reply and
 * UDP datagram to an address is encoded through it, where a regular expression and a split cost an array each.
 */
export function ipv4Value(host: string): number {
  const n = host.length;
  if (n < 7 || n > 15) return -1;
  let value = 0;
  let octet = 0;
  let digits = 0;
  let parts = 0;
  for (let i = 0; i <= n; i++) {
    const c = i === n ? 0x2e : host.charCodeAt(i);
    if (c === 0x2e) {
      if (digits === 0 || octet > 255 || ++parts > 4) return -1;
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39) {
      // A leading zero makes a longer octet something else (net.isIPv4 refuses it).
      if (digits === 1 && octet === 0) return -1;
      octet = octet * 10 + (c - 0x30);
      digits++;
    } else return -1;
  }
  return parts === 4 ? value : -1;
}

/** The 16 bytes of an IPv6 address (an embedded IPv4 tail included). */
export function ipv6Bytes(host: string): Buffer {
  const out = Buffer.alloc(16);
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(host);
  let text = host;
  if (v4) {
    const [a, b, c, d] = [v4[1], v4[2], v4[3], v4[4]].map(Number) as [number, number, number, number];
    text = `${host.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const headParts = head ? head.split(':') : [];
  const tailParts = tail ? tail.split(':') : [];
  const groups = [...headParts, ...Array<string>(8 - headParts.length - tailParts.length).fill('0'), ...tailParts];
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g || '0', 16), i * 2));
  return out;
}
