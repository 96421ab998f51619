// Request rules (`proxy.requestRules`, a user's `requestRules`): compiled once per rule list, then asked on
// the data path only when a list exists. A rule matches a target host, a method, and an outcome: a plain-HTTP
// response's status (and optionally headers), a response head or tunnel first byte later than timeoutMs, or
// a tunnel's failed dial (as 502, or 504 when it timed out), and (plain HTTP) a pattern in the response
// body's first bytes, held before any of them reaches the client. Its action: retry through another exit, ban the
// exit for the user (optionally for that host only), both, or only tag the connection record. A user's rules
// come before the global ones; the first that matches fires.
import type { DialTrace } from '../connlog/types.ts';
import type { AcquireOptions, FailureReason, NodeSource, UpstreamNode } from '../pool/types.ts';
import { BodyMatcher } from './request-rules-matcher.ts';
import { BODY_BYTES_DEFAULT, compileBodyPattern } from './request-rules-pattern.ts';

export type RuleAction = 'retry' | 'ban' | 'retry_ban' | 'tag';

/** A rule as the config and the user record hold it (validated by src/users/request-rules-schema.ts). */
export interface RequestRule {
  name?: string | undefined;
  hosts?: readonly string[] | undefined;
  status?: readonly number[] | undefined;
  timeoutMs?: number | undefined;
  headers?: Readonly<Record<string, string>> | undefined;
  action: RuleAction;
  retries?: number | undefined;
  banSeconds?: number | undefined;
  banHost?: boolean | undefined;
  methods?: readonly string[] | undefined;
  /** a body pattern (checked by the schema: src/proxy/request-rules-pattern.ts) */
  body?: string | undefined;
  bodyBytes?: number | undefined;
  /** When the body match is stopped by its deadline (request-rules-matcher.ts): pass (default) or fire. */
  bodyTimeout?: 'pass' | 'fire' | undefined;
}

/** RFC 9110 §9.2.2's idempotent methods: retried unless a rule lists its own. */
const IDEMPOTENT: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);

/** One compiled rule. */
export class CompiledRule {
  readonly name: string;
  readonly action: RuleAction;
  readonly retries: number;
  readonly banMs: number;
  readonly banHost: boolean;
  readonly timeoutMs: number | undefined;
  /** the body pattern, compiled here once; undefined = the rule does not look at bodies */
  readonly body: RegExp | undefined;
  /** the body pattern's source (what the matcher's thread compiles) */
  readonly bodySource: string | undefined;
  readonly bodyBytes: number;
  /** a body match stopped by the deadline while on this rule's pattern fires the rule */
  readonly fireOnBodyTimeout: boolean;
  private readonly exact: ReadonlySet<string> | undefined;
  private readonly below: readonly string[];
  private readonly statuses: ReadonlySet<number> | undefined;
  private readonly methods: ReadonlySet<string>;
  private readonly headers: ReadonlyArray<[string, string]> | undefined;

  constructor(rule: RequestRule, name: string) {
    this.name = rule.name ?? name;
    this.action = rule.action;
    this.retries = rule.action === 'retry' || rule.action === 'retry_ban' ? Math.max(0, rule.retries ?? 1) : 0;
    this.banMs = rule.action === 'ban' || rule.action === 'retry_ban' ? (rule.banSeconds ?? 600) * 1000 : 0;
    this.banHost = rule.banHost ?? false;
    this.timeoutMs = rule.timeoutMs;
    this.body = rule.body === undefined ? undefined : compileBodyPattern(rule.body);
    this.bodySource = rule.body;
    this.bodyBytes = rule.bodyBytes ?? BODY_BYTES_DEFAULT;
    this.fireOnBodyTimeout = rule.bodyTimeout === 'fire';
    if (rule.hosts && rule.hosts.length > 0) {
      const exact = new Set<string>();
      const below: string[] = [];
      for (const h of rule.hosts) {
        const host = h.toLowerCase();
        if (host.startsWith('*.')) below.push(host.slice(1));
        else if (host.startsWith('.')) {
          exact.add(host.slice(1));
          below.push(host);
        } else exact.add(host);
      }
      this.exact = exact;
      this.below = below;
    } else {
      this.exact = undefined;
      this.below = [];
    }
    this.statuses = rule.status && rule.status.length > 0 ? new Set(rule.status) : undefined;
    this.methods = rule.methods && rule.methods.length > 0 ? new Set(rule.methods.map((m) => m.toUpperCase())) : IDEMPOTENT;
    const headers = rule.headers ? Object.entries(rule.headers).map(([k, v]): [string, string] => [k.toLowerCase(), v.toLowerCase()]) : [];
    this.headers = headers.length > 0 ? headers : undefined;
  }

  /** Does the rule apply to this target host (lower-case)? */
  appliesTo(host: string): boolean {
    if (this.exact === undefined) return true;
    if (this.exact.has(host)) return true;
    for (const suffix of this.below) if (host.endsWith(suffix)) return true;
    return false;
  }

  /** May a request with this method be sent again (the rule lists it, or it is idempotent)? */
  mayRetry(method: string): boolean {
    return this.methods.has(method);
  }

  /**
   * Does a response with this status (and headers, a flat [name, value, …] list) fire the rule? For a rule
   * with a body pattern: may it fire, once the body is seen (a body rule without statuses takes any status).
   */
  firesOn(status: number, rawHeaders: readonly string[] | undefined): boolean {
    if (this.statuses === undefined ? this.body === undefined : !this.statuses.has(status)) return false;
    if (this.headers === undefined) return true;
    if (rawHeaders === undefined) return false;
    for (const [name, want] of this.headers) {
      let found = false;
      for (let i = 0; i < rawHeaders.length; i += 2) {
        if (rawHeaders[i]!.toLowerCase() === name && rawHeaders[i + 1]!.toLowerCase().includes(want)) {
          found = true;
          break;
        }
      }
      if (!found) return false;
    }
    return true;
  }
}

/** The rules one request is held to (the user's, then the global ones), narrowed to its target host. */
export class RuleSet {
  constructor(
    readonly rules: readonly CompiledRule[],
    /** where body patterns run (a thread with a deadline); undefined: on this thread (tests) */
    readonly matcher?: BodyMatcher,
    /** whose rules they are (the user): the matcher serves owners in turn */
    readonly owner?: object,
  ) {}

  /**
   * At a response's head: the first rule it fires, or, when a rule with a body pattern comes first among
   * those it may fire, how many body bytes to hold before deciding (afterBody); undefined = none fires.
   */
  atHead(status: number, rawHeaders: readonly string[]): CompiledRule | number | undefined {
    let hold = 0;
    for (const r of this.rules) {
      if (!r.firesOn(status, rawHeaders)) continue;
      if (r.body === undefined) {
        if (hold === 0) return r;
      } else if (r.bodyBytes > hold) hold = r.bodyBytes;
    }
    return hold > 0 ? hold : undefined;
  }

  /**
   * With the first body bytes in hand (at most the hold atHead asked for): `decide` is called with the first rule
   * the response fires, later, once the body patterns have run on the matcher's thread. A match the deadline
   * stopped fires the rule it was on when that rule says `bodyTimeout: fire`; otherwise that rule and the body
   * rules after it count as not matched, and the first rule without a pattern after them (if any) fires.
   */
  judgeBody(status: number, rawHeaders: readonly string[], body: Buffer, decide: (rule: CompiledRule | undefined) => void): void {
    const matcher = this.matcher;
    if (matcher === undefined) {
      decide(this.afterBody(status, rawHeaders, body));
      return;
    }
    const candidates: CompiledRule[] = [];
    let next: CompiledRule | undefined;
    for (const r of this.rules) {
      if (!r.firesOn(status, rawHeaders)) continue;
      if (r.body === undefined) {
        next = r;
        break;
      }
      candidates.push(r);
    }
    if (candidates.length === 0) {
      decide(next);
      return;
    }
    matcher.match(
      body,
      candidates.map((r) => r.bodySource!),
      candidates.map((r) => r.bodyBytes),
      (found, stoppedAt) => {
        if (found >= 0) decide(candidates[found]);
        else if (stoppedAt !== undefined && candidates[stoppedAt]?.fireOnBodyTimeout) decide(candidates[stoppedAt]);
        else decide(next);
      },
      this.owner,
    );
  }

  /** The first rule the response fires, its body patterns matched on this thread (tests; judgeBody without a matcher). */
  afterBody(status: number, rawHeaders: readonly string[], body: Buffer): CompiledRule | undefined {
    let text: string | undefined;
    let textBytes = -1;
    for (const r of this.rules) {
      if (!r.firesOn(status, rawHeaders)) continue;
      if (r.body === undefined) return r;
      const bytes = Math.min(body.length, r.bodyBytes);
      if (bytes !== textBytes) {
        text = body.toString('utf8', 0, bytes);
        textBytes = bytes;
      }
      if (r.body.test(text!)) return r;
    }
    return undefined;
  }

  /** The first rule fired by a failed dial (502, or 504 when it timed out); a body rule never is (no body). */
  onDialFailure(timedOut: boolean): CompiledRule | undefined {
    const status = timedOut ? 504 : 502;
    for (const r of this.rules) if (r.body === undefined && r.firesOn(status, undefined)) return r;
    return undefined;
  }

  /** The shortest first-byte timeout among the rules, and the rule it belongs to. */
  firstByteRule(): CompiledRule | undefined {
    let best: CompiledRule | undefined;
    for (const r of this.rules) if (r.timeoutMs !== undefined && (best === undefined || r.timeoutMs < best.timeoutMs!)) best = r;
    return best;
  }
}

function compile(list: readonly RequestRule[] | null | undefined, origin: string): CompiledRule[] {
  if (!list || list.length === 0) return [];
  return list.map((r, i) => new CompiledRule(r, `${origin}#${i}`));
}

/**
 * The gateway's rules: the global list compiled at start (and on reload), each user's list compiled the first
 * time it is used and kept while the user object lives. forRequest() is the only data-path call: with no
 * rule anywhere it returns undefined after two property reads.
 */
export class RequestRules {
  private global: CompiledRule[];
  private readonly perUser = new WeakMap<object, CompiledRule[]>();

  private readonly matcher: BodyMatcher | undefined;

  constructor(
    global?: readonly RequestRule[] | null,
    /** where body patterns run (its thread starts with the first body to match); null: on the event loop (tests) */
    matcher: BodyMatcher | null = new BodyMatcher(),
  ) {
    this.matcher = matcher ?? undefined;
    this.global = compile(global, 'proxy');
  }

  /** Config reload: new global rules for every later request. */
  setGlobal(global: readonly RequestRule[] | null | undefined): void {
    this.global = compile(global, 'proxy');
  }

  /** The rules for `user` going to `host`; undefined when none applies (the usual case: no cost). */
  forRequest(user: { readonly requestRules?: readonly RequestRule[] | null | undefined }, host: string): RuleSet | undefined {
    const own = user.requestRules;
    if ((own === undefined || own === null || own.length === 0) && this.global.length === 0) return undefined;
    let mine: CompiledRule[] = [];
    if (own && own.length > 0) {
      let compiled = this.perUser.get(own);
      if (compiled === undefined) {
        compiled = compile(own, 'user');
        this.perUser.set(own, compiled);
      }
      mine = compiled;
    }
    const name = host.toLowerCase();
    const applying: CompiledRule[] = [];
    for (const r of mine) if (r.appliesTo(name)) applying.push(r);
    for (const r of this.global) if (r.appliesTo(name)) applying.push(r);
    return applying.length === 0 ? undefined : new RuleSet(applying, this.matcher, user);
  }
}

/**
 * A pool seen without the exits banned for one request's user (src/proxy/request-bans.ts): the banned ids
 * join every exclusion the dial race asks with. Made only when the user has a ban standing.
 */
export class ExcludingSource implements NodeSource {
  constructor(
    private readonly inner: NodeSource,
    private readonly banned: ReadonlySet<string>,
  ) {}

  private without(exclude: ReadonlySet<string> | undefined): ReadonlySet<string> {
    if (exclude === undefined || exclude.size === 0) return this.banned;
    const all = new Set(this.banned);
    for (const id of exclude) all.add(id);
    return all;
  }

  acquire(exclude?: ReadonlySet<string>, options?: AcquireOptions): Promise<UpstreamNode> {
    return this.inner.acquire(this.without(exclude), options);
  }

  acquireNow(exclude?: ReadonlySet<string>, options?: AcquireOptions): UpstreamNode | undefined {
    if (this.inner.acquireNow === undefined) return undefined;
    return this.inner.acquireNow(this.without(exclude), options);
  }

  release(node: UpstreamNode): void {
    this.inner.release(node);
  }

  reportFailure(node: UpstreamNode, reason: FailureReason): void {
    this.inner.reportFailure(node, reason);
  }

  reportSuccess(node: UpstreamNode): void {
    this.inner.reportSuccess(node);
  }

  isUsable(node: UpstreamNode): boolean {
    return !this.banned.has(node.id) && this.inner.isUsable(node);
  }
}

/**
 * A record's counters as one more dial race sees them: the race counts from zero, the record keeps what
 * earlier dials of the same request (a rule's retry) counted.
 */
export class TraceFrom implements DialTrace {
  private readonly baseRetries: number;
  private readonly baseHedges: number;

  constructor(private readonly trace: DialTrace) {
    this.baseRetries = trace.retries;
    this.baseHedges = trace.hedges;
  }

  get id(): string {
    return this.trace.id;
  }

  get retries(): number {
    return this.trace.retries - this.baseRetries;
  }

  set retries(n: number) {
    this.trace.retries = this.baseRetries + n;
  }

  get hedges(): number {
    return this.trace.hedges - this.baseHedges;
  }

  set hedges(n: number) {
    this.trace.hedges = this.baseHedges + n;
  }
}
