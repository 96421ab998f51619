// Destination rules: where a user's connections may go (docs/reference.md "Users as data", `rules`), checked before
// anything is dialed. Global defaults (`proxy.rules`) and the user's own rules are two rule sets that both
// apply: a target is refused when either refuses it, so a user's allow list never reopens what the operator
// denied for everyone (port 25 by default).
//
// One rule set refuses a target when it matches a deny entry, or when an allow list is non-empty and the
// target matches none of it. Ports and hosts are separate lists. Host entries:
//   example.com      that name only
//   *.example.com    any name below example.com (a.example.com, a.b.example.com), not example.com itself
//   .example.com     example.com and any name below it
//   10.0.0.0/8, ::1  CIDR ranges or addresses, for targets given as IP literals (any spelling a resolver reads;
//                    a loopback entry also catches 0.0.0.0, ::, the other family's loopback and `localhost`)
// Names are matched on the name the client asked for, case-insensitively, trailing dot ignored; Rotor never
// resolves them (the upstream does), so a CIDR entry does not catch a name that resolves into the range.
//
// Compiled once per rules object (a user change brings a new one), a check costs a few Set lookups: one per
// label of the name, or one per distinct prefix length for an address.
import { z } from 'zod';
import { CidrSet, isLocalName, parseIp } from './cidr.ts';

export interface DestinationRules {
  denyPorts?: readonly number[];
  denyHosts?: readonly string[];
  allowPorts?: readonly number[];
  allowHosts?: readonly string[];
}

/** Where a client asked to go (structurally src/proxy/types.ts Target). */
export interface RuleTarget {
  host: string;
  port: number;
}

const NAME_PATTERN = /^(\*\.|\.)?([a-z0-9_-]+\.)*[a-z0-9_-]+$/;

/** A host entry as accepted: a name pattern (see the file comment) or an address / CIDR range. */
export function isHostEntry(entry: string): boolean {
  return NAME_PATTERN.test(entry.toLowerCase()) || CidrSet.isValid(entry);
}

const portEntry = z.number().int().min(1).max(65_535);
const hostEntry = z
  .string()
  .min(1)
  .max(255)
  .refine(isHostEntry, { message: "expected a host name, '*.name', '.name', an IP address or a CIDR range" });

/** `rules` of a user and `proxy.rules`: the zod schema shared by the config and the admin API. */
export const rulesSchema = z.strictObject({
  denyPorts: z.array(portEntry).max(10_000).default([]),
  denyHosts: z.array(hostEntry).max(10_000).default([]),
  allowPorts: z.array(portEntry).max(10_000).default([]),
  allowHosts: z.array(hostEntry).max(10_000).default([]),
});

class HostMatcher {
  private readonly exact = new Set<string>();
  /** names whose strict subdomains match */
  private readonly below = new Set<string>();
  private readonly addresses: CidrSet;
  readonly empty: boolean;

  constructor(entries: readonly string[]) {
    const cidrs: string[] = [];
    for (const raw of entries) {
      const entry = raw.toLowerCase().replace(/\.$/, '');
      if (entry.startsWith('*.')) this.below.add(entry.slice(2));
      else if (entry.startsWith('.')) {
        this.exact.add(entry.slice(1));
        this.below.add(entry.slice(1));
      } else if (parseIp(entry.split('/')[0]!) !== undefined) cidrs.push(entry);
      else this.exact.add(entry);
    }
    this.addresses = new CidrSet(cidrs);
    this.empty = entries.length === 0;
  }

  matches(name: string, ip: ReturnType<typeof parseIp>): boolean {
    // Any spelling of the local host (0.0.0.0, ::, ::1 for a 127.0.0.0/8 rule, NAT64) is matched as loopback.
    if (ip) return this.addresses.reaches(ip);
    if (this.exact.has(name)) return true;
    if (isLocalName(name) && this.addresses.holdsLoopback) return true;
    if (this.below.size === 0) return false;
    for (let dot = name.indexOf('.'); dot >= 0; dot = name.indexOf('.', dot + 1)) {
      if (this.below.has(name.slice(dot + 1))) return true;
    }
    return false;
  }
}

/** One compiled rule set. */
export class RuleSet {
  private readonly denyPorts: ReadonlySet<number>;
  private readonly allowPorts: ReadonlySet<number>;
  private readonly denyHosts: HostMatcher;
  private readonly allowHosts: HostMatcher;
  /** Whether any host entry exists: without one the host (and its IP parse) is never looked at. */
  readonly usesHosts: boolean;

  constructor(rules: DestinationRules = {}) {
    this.denyPorts = new Set(rules.denyPorts ?? []);
    this.allowPorts = new Set(rules.allowPorts ?? []);
    this.denyHosts = new HostMatcher(rules.denyHosts ?? []);
    this.allowHosts = new HostMatcher(rules.allowHosts ?? []);
    this.usesHosts = !this.denyHosts.empty || !this.allowHosts.empty;
  }

  /** A one-line reason when the target is refused; undefined when allowed. `name` is normalized (normalizeHost). */
  refusal(name: string, port: number, ip: ReturnType<typeof parseIp>): string | undefined {
    if (this.denyPorts.has(port) || (this.allowPorts.size > 0 && !this.allowPorts.has(port))) return `target port ${port} is not allowed`;
    if (!this.usesHosts) return undefined;
    if (this.denyHosts.matches(name, ip) || (!this.allowHosts.empty && !this.allowHosts.matches(name, ip)))
      return `target host ${name} is not allowed`;
    return undefined;
  }
}

/** Lower case, no trailing dot, no IPv6 brackets. */
export function normalizeHost(host: string): string {
  // Mostly lower case already (the listeners lower-case what they parse): no copy then (toLowerCase makes one).
  let h = hasUpper(host) ? host.toLowerCase() : host;
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

/** Whether `s` holds a character toLowerCase changes (any non-ASCII one counts). */
function hasUpper(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c >= 0x41 && c <= 0x5a) || c > 0x7f) return true;
  }
  return false;
}

/**
 * The rules in force: the global defaults plus each user's own, compiled on first use per rules object and
 * kept while that object lives (a WeakMap: a user record replaced on change frees its compiled rules).
 */
export class DestinationPolicy {
  private defaults: RuleSet;
  private compiled = new WeakMap<object, RuleSet>();

  constructor(defaults?: DestinationRules) {
    this.defaults = new RuleSet(defaults);
  }

  /** Config reload: new global defaults for every later check. */
  setDefaults(defaults: DestinationRules | undefined): void {
    this.defaults = new RuleSet(defaults);
  }

  /** Why `user` may not go to `target`, in one line; undefined when it may. */
  check(user: { rules?: DestinationRules | null | undefined }, target: RuleTarget): string | undefined {
    const name = normalizeHost(target.host);
    let own: RuleSet | undefined;
    if (user.rules) {
      own = this.compiled.get(user.rules);
      if (!own) {
        own = new RuleSet(user.rules);
        this.compiled.set(user.rules, own);
      }
    }
    // The IP parse (ipaddr.js) was the costliest step of a check, run for every new tunnel; only host
    // entries look at it, and the default rules (port 25) have none.
    const ip = this.defaults.usesHosts || own?.usesHosts ? parseIp(name) : undefined;
    const global = this.defaults.refusal(name, target.port, ip);
    if (global !== undefined || !own) return global;
    return own.refusal(name, target.port, ip);
  }
}
