// Platforms "written by someone else from the same seed": a real HTTP server with the seed's envelope in front
// of the sandbox. Every request is passed on to the sandbox unchanged (same envelope, same ciphertext); its
// answer is decrypted, rewritten by the variant's hooks (another honest reading of what the seed leaves open),
// encrypted again with the seed's AES (key = secret, IV = its first 16 bytes, PKCS#7) and answered. So accounts,
// orders, draws and the loopback upstreams stay real; only the shape of the answers changes.
// startVariantRig runs the real daemon in-process on such a platform (remote mode), with traffic bought for
// its main account, a loopback target and the admin API. Everything on 127.0.0.1, port 0.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AesEnvelope } from '../../src/platform/envelope.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { operationByPath, type OperationName } from '../../src/platform/operations.ts';
import { SIM_PRODUCTS, startSimulator, type Simulator, type SimOptions } from '../../src/sim/index.ts';
import { startGateway, startTarget, type ConfigOverrides, type Gateway, type Target } from '../e2e/harness.ts';
import { buyTraffic } from './orders.ts';

export interface Upstream {
  status: number;
  code: number;
  msg: string;
  reqId: string;
  /** The decrypted data, undefined when the sandbox sent none. */
  data: unknown;
}

export type VariantReply = { status: number; body: string } | { drop: true } | undefined;

export interface VariantHooks {
  /** Rewrites the decrypted `data` of a code-200 answer; returns the value to send. */
  data?: (op: OperationName, data: unknown, params: Record<string, unknown>) => unknown;
  /** Answers instead of the sandbox's reply (the sandbox was still called): HTTP status and body, or a drop. */
  reply?: (op: OperationName, params: Record<string, unknown>, up: Upstream) => VariantReply | Promise<VariantReply>;
  /** Rewrites the request's params before the sandbox sees them (the platform reads a field its own way). */
  request?: (op: OperationName, params: Record<string, unknown>) => Record<string, unknown> | undefined;
  /** Answers without calling the sandbox at all. `method` is the HTTP method the request came with. */
  before?: (
    op: OperationName,
    params: Record<string, unknown>,
    reqId: string,
    method: string,
  ) => { status: number; body: string } | undefined;
  /** How the ciphertext's Base64 is written (default: as Node writes it, one line). */
  encode?: (base64: string) => string;
}

export interface VariantPlatform {
  url: string;
  sim: Simulator;
  appKey: string;
  appSecret: string;
  hooks: VariantHooks;
  /** Calls received per operation. */
  calls: Map<string, number>;
  /** Calls received per operation and HTTP method ("GetProductStock GET"). */
  methods: Map<string, number>;
  aes: AesEnvelope;
  /** An envelope JSON text answering `data` with code 200. */
  ok(reqId: string, data: unknown): string;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** The request envelope: a JSON body, or (a GET) the same fields in the query string. */
function envelopeOf(method: string, url: URL, body: string): Record<string, unknown> {
  if (method === 'GET') return Object.fromEntries(url.searchParams);
  try {
    return JSON.parse(body) as Record<string, unknown>;
  } catch {
    return {};
  }
}

export async function startVariantPlatform(hooks: VariantHooks = {}, simOptions: SimOptions = {}): Promise<VariantPlatform> {
  const sim = await startSimulator({ orderDelayMs: 100, ...simOptions });
  const aes = new AesEnvelope(sim.appSecret);
  const calls = new Map<string, number>();
  const methods = new Map<string, number>();
  const platform = { hooks } as VariantPlatform;
  const encode = (b64: string): string => (platform.hooks.encode ? platform.hooks.encode(b64) : b64);
  const ok = (reqId: string, data: unknown): string =>
    JSON.stringify({ reqId, code: 200, msg: 'success', ...(data === undefined ? {} : { data: encode(aes.encryptJson(data)) }) });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readBody(req);
    const method = req.method ?? 'GET';
    const url = new URL(req.url ?? '/', 'http://variant');
    const op = operationByPath(url.pathname);
    const send = (status: number, text: string): void => {
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    if (!op) {
      // /sim test routes and extraction links: straight through.
      const r = await fetch(sim.baseUrl + (req.url ?? '/'), {
        method,
        ...(method === 'GET' || method === 'HEAD' ? {} : { body, headers: { 'content-type': 'application/json' } }),
      });
      send(r.status, await r.text());
      return;
    }
    calls.set(op, (calls.get(op) ?? 0) + 1);
    methods.set(`${op} ${method}`, (methods.get(`${op} ${method}`) ?? 0) + 1);
    const envelope = envelopeOf(method, url, body);
    const reqId = typeof envelope.reqId === 'string' ? envelope.reqId : '';
    let params: Record<string, unknown> = {};
    try {
      if (typeof envelope.params === 'string') params = aes.decryptJson(envelope.params) as Record<string, unknown>;
    } catch {
      params = {};
    }
    const early = platform.hooks.before?.(op, params, reqId, method);
    if (early) return send(early.status, early.body);
    const rewritten = platform.hooks.request?.(op, params);
    const r = await fetch(sim.baseUrl + url.pathname, {
      method: 'POST',
      body: JSON.stringify(rewritten ? { ...envelope, params: aes.encryptJson(rewritten) } : envelope),
      headers: { 'content-type': 'application/json' },
    });
    const text = await r.text();
    const env = JSON.parse(text) as { reqId: string; code: number; msg: string; data?: string };
    const up: Upstream = {
      status: r.status,
      code: env.code,
      msg: env.msg,
      reqId: env.reqId,
      data: env.data ? aes.decryptJson(env.data) : undefined,
    };
    const own = await platform.hooks.reply?.(op, params, up);
    if (own && 'drop' in own) {
      // The platform did the work; its answer is lost on the way (a proxy, a reset connection).
      req.socket.destroy();
      return;
    }
    if (own) return send(own.status, own.body);
    if (up.code !== 200) return send(r.status, text);
    const data = platform.hooks.data ? platform.hooks.data(op, up.data, params) : up.data;
    send(
      r.status,
      JSON.stringify({ reqId: up.reqId, code: 200, msg: up.msg, ...(data === undefined ? {} : { data: encode(aes.encryptJson(data)) }) }),
    );
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(String(err));
      } else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  Object.assign(platform, {
    url: `http://127.0.0.1:${port}`,
    sim,
    appKey: sim.appKey,
    appSecret: sim.appSecret,
    calls,
    methods,
    aes,
    ok,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await sim.close();
    },
  });
  return platform;
}

/** Base64 wrapped in lines (76 characters, CRLF by default), as Java's MIME encoders and Python's encodebytes write it. */
export function mimeWrap(b64: string, width = 76, eol = '\r\n'): string {
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += width) lines.push(b64.slice(i, i + width));
  return lines.join(eol) + (b64.length > width ? eol : '');
}

// ───────────────────────────── the daemon on a variant platform ─────────────────────────────

export const VARIANT_USER = 'vuser';
export const VARIANT_PASS = 'vuser-pass';
export const VARIANT_MAIN = 'vshop';

export interface VariantRig {
  platform: VariantPlatform;
  gw: Gateway;
  target: Target;
  /** A client straight to the sandbox (not through the variant). */
  direct: PlatformClient;
  close(): Promise<void>;
}

export interface VariantRigOptions {
  hooks?: VariantHooks;
  /** Hooks switched on only after the daemon is up (the start itself on the sandbox's own shapes). */
  hooksAfterStart?: VariantHooks;
  product?: string;
  /** MB bought before the start (0: none). */
  flowMb?: number;
  /** Buys what the user needs instead of `flowMb` of traffic (after the main account is made). */
  buy?: (direct: PlatformClient) => Promise<void>;
  /** Make the main account before the start (default true; false: the daemon must make it). */
  preCreate?: boolean;
  /** false: the platform has no callback address for the merchant (orders are learned by polling only). */
  callbacks?: boolean;
  config?: ConfigOverrides;
  users?: unknown[];
  sim?: SimOptions;
  platform?: Record<string, unknown>;
}

export async function startVariantRig(o: VariantRigOptions = {}): Promise<VariantRig> {
  const product = o.product ?? SIM_PRODUCTS.dynamicTraffic;
  const platform = await startVariantPlatform(o.hooks ?? {}, o.sim ?? {});
  const direct = new PlatformClient({ baseUrl: platform.sim.baseUrl, appKey: platform.appKey, appSecret: platform.appSecret, retries: 0 });
  let gw: Gateway | undefined;
  let target: Target | undefined;
  try {
    if (o.preCreate !== false) await direct.call('CreateUser', { appUsername: VARIANT_MAIN, status: 1 });
    if (o.buy) await o.buy(direct);
    else if (o.preCreate !== false && (o.flowMb ?? 1024) > 0) await buyTraffic(direct, VARIANT_MAIN, product, o.flowMb ?? 1024);
    target = await startTarget();
    gw = await startGateway({
      config: {
        platform: {
          mode: 'remote',
          baseUrl: platform.url,
          appKey: platform.appKey,
          appSecret: platform.appSecret,
          timeoutMs: 5000,
          retries: 1,
          backoff: { baseMs: 50, maxMs: 200 },
          ...o.platform,
        },
        users: o.users ?? [
          { name: VARIANT_USER, password: VARIANT_PASS, mainAccount: VARIANT_MAIN, product, draw: 'pwd', sessTime: 5, limitBytes: -1 },
        ],
        ...o.config,
      },
    });
    if (o.callbacks !== false) platform.sim.setCallbackUrl(`http://127.0.0.1:${gw.ports.callback}${gw.config.callback.path}`);
    if (o.hooksAfterStart) Object.assign(platform.hooks, o.hooksAfterStart);
  } catch (err) {
    await gw?.close();
    await target?.close();
    direct.close();
    await platform.close();
    throw err;
  }
  const g = gw;
  const t = target;
  return {
    platform,
    gw: g,
    target: t,
    direct,
    async close() {
      await g.close(0);
      await t.close();
      direct.close();
      await platform.close();
    },
  };
}

/** What GET /v1/pools says of the user's pool's last draw error (for failure messages). */
export async function poolError(rig: VariantRig, user = VARIANT_USER): Promise<string> {
  const pools = await rig.gw.admin<Array<{ key: { user: string }; drawError?: { message: string; code?: string } }>>('/v1/pools');
  const p = pools.body.find((x) => x.key.user === user);
  return JSON.stringify(p?.drawError ?? p ?? null);
}
