// A set of address ranges (CIDR, or bare addresses as /32 and /128) matched in time bounded by the number of
// distinct prefix lengths, not by the number of ranges: each range is stored as its masked network under its
// prefix length, and an address is masked once per length in use and looked up. Shared by destination rules
// (CIDR entries for IP-literal targets) and per-user ports (`listen.allowIps`).
//
// Parsing goes through ipaddr.js, which also reads the shorthand IPv4 forms a resolver would accept
// (`10.1`, `0x7f.1`, `2130706433`), so a rule on 10.0.0.0/8 is not dodged by spelling 10.0.0.1 another way;
// IPv4-mapped IPv6 (`::ffff:10.0.0.1`) is matched as the IPv4 address it carries. Addresses that reach the
// local host by another name are matched as loopback too (localAliases): the unspecified `0.0.0.0` and `::`
// (a connect to them lands on the host itself), any loopback address in either family (a rule on
// 127.0.0.0/8 or on ::1 catches both families' loopback), and the IPv4 inside a NAT64 address (64:ff9b::/96).
import ipaddr from 'ipaddr.js';
import { RotorError } from '../errors/rotor-error.ts';

export class CidrError extends RotorError {
  constructor(entry: string) {
    super('CIDR_INVALID', `'${entry}' is not an IP address or CIDR range`, { httpStatus: 400 });
  }
}

type Family = 'ipv4' | 'ipv6';

/** The address as its bytes, IPv4-mapped IPv6 unwrapped; undefined when `text` is no IP literal. */
export function parseIp(text: string): ParsedIp | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  // ipaddr.isValid accepts zone ids and the shorthand IPv4 forms; anything else is a host name.
  if (!ipaddr.isValid(bare)) return undefined;
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.process(bare);
  } catch {
    return undefined;
  }
  return addr.kind() === 'ipv4'
    ? { family: 'ipv4', bytes: (addr as ipaddr.IPv4).octets }
    : { family: 'ipv6', bytes: (addr as ipaddr.IPv6).toByteArray() };
}

export type ParsedIp = { family: Family; bytes: number[] };

const V4_LOOPBACK: ParsedIp = { family: 'ipv4', bytes: [127, 0, 0, 1] };
const V6_LOOPBACK: ParsedIp = { family: 'ipv6', bytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1] };
const LOOPBACKS: readonly ParsedIp[] = [V4_LOOPBACK, V6_LOOPBACK];

function isLocal(ip: ParsedIp): boolean {
  const b = ip.bytes;
  if (ip.family === 'ipv4') return b[0] === 127 || (b[0] === 0 && b[1] === 0 && b[2] === 0 && b[3] === 0);
  for (let i = 0; i < 15; i++) if (b[i] !== 0) return false;
  return b[15] === 0 || b[15] === 1;
}

/**
 * Other addresses a target reaches, for matching: the embedded IPv4 of a NAT64 address, and for anything that
 * lands on the local host (loopback or unspecified, either family) both families' loopback. Empty for most.
 */
export function localAliases(ip: ParsedIp): readonly ParsedIp[] {
  let target = ip;
  const b = ip.bytes;
  // 64:ff9b::/96, the well-known NAT64 prefix (RFC 6052): the last 32 bits are the IPv4 address reached.
  if (ip.family === 'ipv6' && b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && b.slice(4, 12).every((x) => x === 0)) {
    target = { family: 'ipv4', bytes: b.slice(12) };
    return isLocal(target) ? [target, ...LOOPBACKS] : [target];
  }
  return isLocal(target) ? LOOPBACKS : [];
}

/** Host names that are the local host by definition (RFC 6761 §6.3): `localhost` and any name below it. */
export function isLocalName(name: string): boolean {
  return name === 'localhost' || name.endsWith('.localhost');
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

  hasParsed(parsed: ParsedIp): boolean {
    for (const [bits, set] of this.byLength[parsed.family]) if (set.has(maskKey(parsed.bytes, bits))) return true;
    return false;
  }

  /** hasParsed for the address or any address it stands for (localAliases). */
  reaches(parsed: ParsedIp): boolean {
    if (this.hasParsed(parsed)) return true;
    for (const alias of localAliases(parsed)) if (this.hasParsed(alias)) return true;
    return false;
  }

  /** Whether a range holds the local host's loopback (what a `localhost` name reaches). */
  get holdsLoopback(): boolean {
    return LOOPBACKS.some((a) => this.hasParsed(a));
  }
}
