// Drawers turn a platform draw into upstream nodes. PwdDrawer uses DrawByPwd (seed 4.15: the strings come
// back in the answer, charged to the user's sub account); ApiDrawer uses DrawByApi (seed 4.16: the answer
// holds extraction links, fetched here, for the main account and a whitelisted egress address).
// Platform errors are rethrown as they are, so callers see the seed's code.
import type { OpRequest, OpResponse, OperationName } from '../platform/operations.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { ExtractionError, fetchExtraction } from './extraction.ts';
import { toNode, type ParsedProxy } from './proxy-string.ts';
import { readPwdAnswer, type DropReason } from './pwd-answer.ts';
import type { UpstreamNode, UpstreamProtocol } from './types.ts';
import type { Logger } from '../telemetry/logger.ts';
import { RotorError } from '../errors/rotor-error.ts';

export interface Drawer {
  /** Draws up to `count` fresh nodes. Rejects with the platform's or the extraction's error. */
  draw(count: number): Promise<UpstreamNode[]>;
  /** What the admin view shows of the drawer (IPs left of a package sold by IP count). */
  status?(): DrawerStatus;
}

export interface DrawerStatus {
  /** products sold by IP count: IPs left in the package, as of the last draw */
  ipsLeft?: number;
}

/** The two platform operations drawers need; keeps drawers testable without the client. */
export interface DrawApi {
  drawByPwd(req: OpRequest<'DrawByPwd'>): Promise<OpResponse<'DrawByPwd'>>;
  drawByApi(req: OpRequest<'DrawByApi'>): Promise<OpResponse<'DrawByApi'>>;
}

/** Anything with the platform client's `call` (src/platform/client.ts). */
export interface PlatformCaller {
  call<N extends OperationName>(name: N, params: OpRequest<N>): Promise<OpResponse<N>>;
}

export function drawApiFromClient(client: PlatformCaller): DrawApi {
  return {
    drawByPwd: (req) => client.call('DrawByPwd', req),
    drawByApi: (req) => client.call('DrawByApi', req),
  };
}

export type DrawMethod = 'pwd' | 'api';
/** Label `result` of rotor_draws_total. */
export type DrawResult = 'ok' | 'empty' | 'platform_error' | 'extraction_error' | 'unparsable' | 'error';

/** The draw answered, but not one string in it was a proxy. */
export class DrawUnparsableError extends RotorError {
  constructor(
    readonly method: DrawMethod,
    readonly rejected: number,
    /** The first parser problem seen (never the string itself). */
    readonly problem: string,
  ) {
    super('DRAW_UNPARSABLE', `${method} draw returned ${rejected} string(s), none a proxy address (${problem})`, { httpStatus: 502 });
  }
}

function resultOf(err: unknown): DrawResult {
  if (err instanceof ExtractionError) return 'extraction_error';
  if (err instanceof DrawUnparsableError) return 'unparsable';
  if (err && typeof err === 'object' && (err as { code?: unknown }).code === 'PLATFORM_ERROR') return 'platform_error';
  return 'error';
}

async function counted(method: DrawMethod, metrics: Metrics | undefined, run: () => Promise<UpstreamNode[]>): Promise<UpstreamNode[]> {
  try {
    const nodes = await run();
    metrics?.draws.inc({ method, result: nodes.length > 0 ? 'ok' : 'empty' });
    return nodes;
  } catch (err) {
    metrics?.draws.inc({ method, result: resultOf(err) });
    throw err;
  }
}

function unique(nodes: UpstreamNode[]): UpstreamNode[] {
  const seen = new Map<string, UpstreamNode>();
  for (const n of nodes) seen.set(n.id, n);
  return [...seen.values()];
}

export interface PwdDrawerOptions {
  api: DrawApi;
  /** The local user's platform sub account (appUsername). */
  subAccount: string;
  productNo: string;
  /** addressCode; '' = any. */
  region?: string;
  /** Minutes each drawn credential keeps its exit; nodes expire this long after the draw when > 0. */
  sessTime?: number;
  /** Protocol of strings that carry no scheme: the product's protocol. Default socks5 (the seed's default). */
  protocol?: UpstreamProtocol;
  proxyType?: 104 | 105;
  maxFlowLimit?: number;
  /** Extraction links DrawByPwd may return in `proxyUrl`, fetched with this timeout. */
  fetchTimeoutMs?: number;
  fetch?: typeof fetch;
  now?: () => number;
  metrics?: Metrics;
  /** Where dropped entries are reported (once per reason). */
  logger?: Logger;
}

export class PwdDrawer implements Drawer {
  constructor(private readonly o: PwdDrawerOptions) {}

  draw(count: number): Promise<UpstreamNode[]> {
    return counted('pwd', this.o.metrics, () => this.run(count));
  }

  private async run(count: number): Promise<UpstreamNode[]> {
    const o = this.o;
    const protocol = o.protocol ?? 'socks5';
    const req: OpRequest<'DrawByPwd'> = { appUsername: o.subAccount, productNo: o.productNo, num: Math.max(1, Math.floor(count)) };
    if (o.region) req.addressCode = o.region;
    if (o.sessTime !== undefined) req.sessTime = String(o.sessTime);
    if (o.proxyType !== undefined) req.proxyType = o.proxyType;
    if (o.maxFlowLimit !== undefined) req.maxFlowLimit = o.maxFlowLimit;
    const res = await o.api.drawByPwd(req);
    const drawnAt = (o.now ?? Date.now)();
    const expiresAt = o.sessTime !== undefined && o.sessTime > 0 ? drawnAt + o.sessTime * 60_000 : undefined;

    const answer = readPwdAnswer(res.list ?? [], protocol);
    const parsed = answer.proxies;
    const dropped = [...answer.dropped];
    for (const link of answer.links) {
      const r = await fetchExtraction(link, {
        defaultProtocol: protocol,
        timeoutMs: o.fetchTimeoutMs ?? 10_000,
        ...(o.fetch ? { fetch: o.fetch } : {}),
      });
      for (const p of r.proxies) {
        if (p.username !== undefined && p.password !== undefined) parsed.push(p);
        else dropped.push({ reason: 'no_credentials', detail: `${p.host}:${p.port}` });
      }
    }
    for (const d of dropped) this.warnOnce(d.reason, d.detail);
    if (parsed.length === 0 && dropped.length > 0) throw new DrawUnparsableError('pwd', dropped.length, dropped[0]!.reason);
    return unique(parsed.map((p) => toNode(p, 'pwd', expiresAt)));
  }

  private readonly warned = new Set<DropReason>();

  /** A platform that answers oddly does so on every draw: say it once per reason, at warn. */
  private warnOnce(reason: DropReason, detail: string): void {
    if (this.warned.has(reason)) return;
    this.warned.add(reason);
    this.o.logger?.warn({ productNo: this.o.productNo, reason, example: detail }, `password draw: dropped an entry (${DROP_TEXT[reason]})`);
  }
}

const DROP_TEXT: Record<DropReason, string> = {
  no_credentials: 'a proxy address without credentials cannot serve a password draw',
  pair_without_gateway: 'a user:pass pair came without a gateway address to join it with',
  unparsable: 'not a proxy address in any known form',
};

export interface ApiDrawerOptions {
  api: DrawApi;
  /** The user's platform main account (appUsername). */
  mainAccount: string;
  productNo: string;
  proxyType: 104 | 105;
  region?: string;
  /** What the extraction should return; also the protocol of strings without a scheme. Default socks5. */
  protocol?: UpstreamProtocol;
  returnType?: 'txt' | 'json';
  delimiter?: 1 | 2 | 3 | 4 | 5;
  maxFlowLimit?: number;
  fetchTimeoutMs?: number;
  /** Minutes a drawn node is handed out for; undefined: until it fails. */
  ttlMinutes?: number;
  fetch?: typeof fetch;
  now?: () => number;
  metrics?: Metrics;
  /**
   * The platform's address (platform.baseUrl): a `proxyUrl` without a scheme — a path on the platform's own host,
   * `/extract/…` (seed 4.16 does not say the address's form) — is fetched from there.
   */
  linkBase?: string;
}

/** An extraction address as given, or, without a scheme, resolved against the platform's address. */
export function extractionUrl(proxyUrl: string, linkBase: string | undefined): string {
  if (!linkBase || /^[A-Za-z][A-Za-z0-9+.-]*:/.test(proxyUrl.trim())) return proxyUrl;
  try {
    return new URL(proxyUrl.trim(), linkBase).href;
  } catch {
    return proxyUrl;
  }
}

export class ApiDrawer implements Drawer {
  constructor(private readonly o: ApiDrawerOptions) {}

  draw(count: number): Promise<UpstreamNode[]> {
    return counted('api', this.o.metrics, () => this.run(count));
  }

  private async run(count: number): Promise<UpstreamNode[]> {
    const o = this.o;
    const protocol = o.protocol ?? 'socks5';
    const req: OpRequest<'DrawByApi'> = {
      appUsername: o.mainAccount,
      proxyType: o.proxyType,
      productNo: o.productNo,
      num: Math.max(1, Math.floor(count)),
      protocol,
    };
    if (o.region) req.addressCode = o.region;
    if (o.returnType) req.returnType = o.returnType;
    if (o.delimiter) req.delimiter = o.delimiter;
    if (o.maxFlowLimit !== undefined) req.maxFlowLimit = o.maxFlowLimit;
    const res = await o.api.drawByApi(req);
    const parsed: ParsedProxy[] = [];
    let firstError: unknown;
    for (const item of res.list) {
      try {
        const r = await fetchExtraction(extractionUrl(item.proxyUrl, o.linkBase), {
          defaultProtocol: protocol,
          timeoutMs: o.fetchTimeoutMs ?? 10_000,
          ...(o.fetch ? { fetch: o.fetch } : {}),
        });
        parsed.push(...r.proxies);
      } catch (err) {
        firstError ??= err;
      }
    }
    // One dead link among several is tolerated; all dead is the draw's failure.
    if (parsed.length === 0 && firstError !== undefined) throw firstError;
    const drawnAt = (o.now ?? Date.now)();
    const expiresAt = o.ttlMinutes !== undefined && o.ttlMinutes > 0 ? drawnAt + o.ttlMinutes * 60_000 : undefined;
    return unique(parsed.map((p) => toNode(p, 'api', expiresAt)));
  }
}
