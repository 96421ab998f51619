// A set of address ranges (CIDR, or bare addresses as /32 and /128) matched in time bounded by the number of
// distinct prefix lengths, not by the number of ranges: each range is stored as its masked network under its
// prefix length, and an address is masked once per length in use and looked up. Shared by destination rules
// (CIDR entries for IP-literal targets) and per-user ports (`listen.allowIps`).
//
// Parsing goes through ipaddr.js, which also reads the shorthand IPv4 forms a resolver would accept
// (`10.1`, `0x7f.1`, `2130706433`), so a rule on 10.0.0.0/8 is not dodged by spelling 10.0.0.1 another way;
// IPv4-mapped IPv6 (`::ffff:10.0.0.1`) is matched as the IPv4 address it carries.
import ipaddr from 'ipaddr.js';
import { RotorError } from '../errors/rotor-error.ts';

export class CidrError extends RotorError {
  constructor(entry: string) {
    super('CIDR_INVALID', `'${entry}' is not an IP address or CIDR range`, { httpStatus: 400 });
  }
}

type Family = 'ipv4' | 'ipv6';

/** The address as its bytes, IPv4-mapped IPv6 unwrapped; undefined when `text` is no IP literal. */
export function parseIp(text: string): { family: Family; bytes: number[] } | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  // ipaddr.isValid accepts zone ids and the shorthand IPv4 forms; anything else is a host name.
  if (!ipaddr.isValid(bare)) return undefined;
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.process(bare);
  } catch {
    return undefined;
  }
  return addr.kind() === 'ipv4' ? { family: 'ipv4', bytes: (addr as ipaddr.IPv4).octets } : { family: 'ipv6', bytes: (addr as ipaddr.IPv6).toByteArray() };
}

/** The first `bits` bits of `bytes` as a string key (the rest zeroed). */
function maskKey(bytes: readonly number[], bits: number): string {
  let key = '';
  for (let i = 0; i < bytes.length; i++) {
    const take = Math.max(0, Math.min(8, bits - i * 8));
    const mask = take === 0 ? 0 : (0xff << (8 - take)) & 0xff;
    key += String.fromCharCode(bytes[i]! & mask);
  }
  return key;
}

export class CidrSet {
  /** per family: prefix length -> masked networks */
  private readonly byLength: Record<Family, Map<number, Set<string>>> = { ipv4: new Map(), ipv6: new Map() };
  readonly size: number;

  /** Throws CidrError naming the first entry that is neither an address nor a CIDR range. */
  constructor(entries: readonly string[]) {
    for (const entry of entries) this.add(entry);
    this.size = entries.length;
  }

  /** Whether `text` is an entry CidrSet accepts (for config and API validation). */
  static isValid(entry: string): boolean {
    try {
      new CidrSet([entry]);
      return true;
    } catch {
      return false;
    }
  }

  private add(entry: string): void {
    const slash = entry.indexOf('/');
    const addrText = slash < 0 ? entry : entry.slice(0, slash);
    const parsed = parseIp(addrText);
    if (!parsed) throw new CidrError(entry);
    const max = parsed.family === 'ipv4' ? 32 : 128;
    let bits = max;
    if (slash >= 0) {
      const lenText = entry.slice(slash + 1);
      if (!/^\d{1,3}$/.test(lenText)) throw new CidrError(entry);
      bits = Number(lenText);
      // A mapped IPv4 written as ::ffff:a.b.c.d/120 counts its prefix in IPv6 bits.
      if (parsed.family === 'ipv4' && addrText.includes(':')) bits -= 96;
      if (bits < 0 || bits > max) throw new CidrError(entry);
    }
    const lengths = this.byLength[parsed.family];
    let set = lengths.get(bits);
    if (!set) lengths.set(bits, (set = new Set()));
    set.add(maskKey(parsed.bytes, bits));
  }

  /** Whether the IP literal `text` falls in any range; false for anything that is not an IP literal. */
  has(text: string): boolean {
    const parsed = parseIp(text);
    return parsed !== undefined && this.hasParsed(parsed);
  }

  hasParsed(parsed: { family: Family; bytes: number[] }): boolean {
    for (const [bits, set] of this.byLength[parsed.family]) if (set.has(maskKey(parsed.bytes, bits))) return true;
    return false;
  }
}
