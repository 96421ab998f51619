// Drawing dynamic proxies (seed 4.15, 4.16) and the extraction link.
//
// The seed shows neither the drawn strings' format nor the link's output; the sandbox's choices:
// - DrawByPwd answers list: [{proxyUrl: <first string>, list: [<num strings>]}]. The string form depends on
//   the product, so every form Rotor must parse gets exercised:
//     DYN-104-FLOW  socks5://<user>:<pass>@<host>:<port>   (user and pass URL-encoded)
//     DYN-105-FLOW  <host>:<port>:<user>:<pass>
//     DYN-104-IP    <user>:<pass>@<host>:<port>
//   <user> is the upstreams' encoding of {sub account, product, session, sessTime, addressCode}; <pass> is
//   the sub account's password; ports rotate over the password gateways. sessTime 0/-1 on a product without
//   proxyEverytimeChange becomes 5 (seed 4.15); above the product's pwdDrawSessionRange → 10093.
//   maxFlowLimit > 0 sets the sub account's limit for the product to that many MB.
//   The layout of the answer is a sim setting (faults.ts PwdDrawShape: POST /sim/faults {pwdDrawShape}):
//   the default above, or proxyUrl = a gateway host:port with full lines, host:port:user:pass or user:pass
//   in `list`, or one full line per item with `list` empty, or an extraction link listing the lines.
//   pwdDrawProxyUser -1: only a main account (its own same-name sub account) may draw by password.
//   A product listed in `backconnect` (SimOptions, POST /sim/faults) answers like a provider's backconnect
//   gateway instead: the same line on every draw, the exit rotating at the gateway per connection.
// - DrawByApi answers list: [{proxyUrl: '<sandbox>/sim/extract/<token>'}]. GET on the link (from a
//   whitelisted address) extracts `num` entries of <host>:<whitelistPort>: txt joined by the delimiter
//   (1 CRLF, 2 the literal "/br", 3 CR, 4 LF, 5 TAB; no trailing delimiter), or json
//   {"code":0,"msg":"success","data":[{"ip","port"}]}. Refusals answer HTTP 200 with
//   {"code":<part-7 code>,"msg":"…"} in either mode, as extraction services commonly do.
import { CODE } from '../../platform/codes.ts';
import type { DrawnCredential } from '../contracts.ts';
import { drawableCodes, SIM_PRODUCTS, type SimProduct } from './catalog.ts';
import type { In, SimContext } from './context.ts';
import { SimError } from './errors.ts';
import { dynamicProduct, mainByEither } from './accounts.ts';
import { bytesPerMb } from './money.ts';
import type { PwdDrawShape } from './faults.ts';

const MAX_DRAW = 100;

function checkRegion(product: SimProduct, addressCode: string | undefined, globalFlag: number): void {
  if (!addressCode) {
    if (globalFlag !== 1) throw new SimError(CODE.INVALID_PARAMS, 'the product needs an addressCode');
    return;
  }
  if (!drawableCodes(product.productNo).has(addressCode)) throw new SimError(CODE.REGION_NOT_FOUND, addressCode);
}

function sessionMinutes(product: SimProduct, sessTime: string | undefined): number {
  const n = sessTime === undefined || sessTime === '' ? 5 : Number(sessTime);
  if (n === 0 || n === -1) return product.proxyEverytimeChange === 1 ? n : 5;
  const [lo, hi] = (product.pwdDrawSessionRange || '1-120').split('-').map(Number);
  if (n < (lo ?? 1) || n > (hi ?? 120)) throw new SimError(CODE.SESS_TIME_RANGE);
  return n;
}

export function drawByPwd(ctx: SimContext, params: In<'DrawByPwd'>): unknown {
  const { state, upstreams } = ctx;
  const sub = state.subs.get(params.appUsername);
  if (!sub) throw new SimError(CODE.SUB_USERNAME_NOT_FOUND, params.appUsername);
  const product = dynamicProduct(ctx, params.productNo, params.proxyType);
  // pwdDrawProxyUser -1: only the main account (its own same-name sub account) may draw by password.
  if (product.pwdDrawProxyUser !== 1 && sub.appUsername !== sub.main) {
    throw new SimError(CODE.INVALID_PARAMS, 'the product does not let sub accounts draw by password');
  }
  checkRegion(product, params.addressCode, product.proxyGlobalRandom);
  const sessTime = sessionMinutes(product, params.sessTime);
  const num = params.num ?? 1;
  if (num > MAX_DRAW) throw new SimError(CODE.INVALID_PARAMS, `num above ${MAX_DRAW}`);
  if (product.ipCount > 0) {
    const b = state.mains.get(sub.main)?.balances.get(product.productNo);
    if (!b || b.ipTotal - b.ipUsed < num) throw new SimError(CODE.ALLOCATE_BALANCE, 'not enough IPs');
    b.ipUsed += num;
  }
  if (params.maxFlowLimit !== undefined && params.maxFlowLimit > 0) {
    sub.limits.set(product.productNo, params.maxFlowLimit * bytesPerMb(product.flowConversionBase));
  }
  const external = ctx.drawnLines?.get(product.productNo);
  if (external && external.length > 0) {
    const lines = drawExternal(ctx, product.productNo, external, num);
    return { list: [{ proxyUrl: lines[0], list: lines }] };
  }
  const host = upstreams?.host ?? '127.0.0.1';
  const ports = upstreams?.gatewayPorts.length ? upstreams.gatewayPorts : [0];
  const drawn: Array<{ port: number; user: string }> = [];
  if (ctx.faults.backconnect.has(product.productNo)) {
    // A backconnect gateway: one credential per sub account and region, answered `num` times on every draw;
    // sessTime 0 in it makes the gateway pick a new exit for each connection.
    const credential: DrawnCredential = {
      account: sub.appUsername,
      productNo: product.productNo,
      sessionId: 'rotating',
      sessTime: 0,
      ...(params.addressCode ? { addressCode: params.addressCode } : {}),
    };
    const user = upstreams ? upstreams.encodeUsername(credential) : `${credential.account}.${credential.sessionId}`;
    for (let i = 0; i < num; i++) drawn.push({ port: ports[0] ?? 0, user });
    return { list: shapeAnswer(ctx, ctx.faults.pwdDrawShape, host, drawn, sub.password, product.productNo) };
  }
  for (let i = 0; i < num; i++) {
    const credential: DrawnCredential = {
      account: sub.appUsername,
      productNo: product.productNo,
      sessionId: state.token(10),
      sessTime,
      ...(params.addressCode ? { addressCode: params.addressCode } : {}),
    };
    const user = upstreams ? upstreams.encodeUsername(credential) : `${credential.account}.${credential.sessionId}`;
    drawn.push({ port: ports[i % ports.length] ?? 0, user });
  }
  return { list: shapeAnswer(ctx, ctx.faults.pwdDrawShape, host, drawn, sub.password, product.productNo) };
}

type DrawnItem = { proxyUrl?: string; list?: string[] };

/** Lays the drawn credentials out in one of the shapes the seed allows (faults.ts PwdDrawShape). */
function shapeAnswer(
  ctx: SimContext,
  shape: PwdDrawShape,
  host: string,
  drawn: Array<{ port: number; user: string }>,
  pass: string,
  productNo: string,
): DrawnItem[] {
  const url = (d: { port: number; user: string }) => `socks5://${encodeURIComponent(d.user)}:${encodeURIComponent(pass)}@${host}:${d.port}`;
  const colon = (d: { port: number; user: string }) => `${host}:${d.port}:${d.user}:${pass}`;
  const byGateway = (line: (d: { port: number; user: string }) => string): DrawnItem[] => {
    const groups = new Map<number, string[]>();
    for (const d of drawn) groups.set(d.port, [...(groups.get(d.port) ?? []), line(d)]);
    return [...groups].map(([port, list]) => ({ proxyUrl: `${host}:${port}`, list }));
  };
  switch (shape) {
    case 'line':
      return drawn.map((d) => ({ proxyUrl: formatDrawn(productNo, host, d.port, d.user, pass), list: [] }));
    case 'gateway-urls':
      return byGateway(url);
    case 'gateway-colon':
      return byGateway(colon);
    case 'gateway-pairs':
      return byGateway((d) => `${d.user}:${pass}`);
    case 'link': {
      const token = ctx.state.token(24);
      ctx.state.extractTokens.set(token, {
        account: '',
        productNo,
        num: drawn.length,
        protocol: 'socks5',
        returnType: 'txt',
        delimiter: 1,
        addressCode: '',
        lines: drawn.map(colon),
      });
      return [{ proxyUrl: `${ctx.baseUrl()}/sim/extract/${token}` }];
    }
    default: {
      const list = drawn.map((d) => formatDrawn(productNo, host, d.port, d.user, pass));
      return [{ proxyUrl: list[0], list }];
    }
  }
}

/**
 * Lines of proxies outside the sandbox (a benchmark's squid and microsocks), handed out round robin in place
 * of the sandbox's gateways: the draw is checked and charged as usual, the traffic never passes the sandbox.
 */
function drawExternal(ctx: SimContext, productNo: string, lines: readonly string[], num: number): string[] {
  const next = (ctx.drawnNext ??= new Map());
  let at = next.get(productNo) ?? 0;
  const out: string[] = [];
  for (let i = 0; i < num; i++) out.push(lines[at++ % lines.length]!);
  next.set(productNo, at % lines.length);
  return out;
}

function formatDrawn(productNo: string, host: string, port: number, user: string, pass: string): string {
  if (productNo === SIM_PRODUCTS.dynamicTrafficCn) return `${host}:${port}:${user}:${pass}`;
  if (productNo === SIM_PRODUCTS.dynamicIpCount) return `${user}:${pass}@${host}:${port}`;
  return `socks5://${encodeURIComponent(user)}:${encodeURIComponent(pass)}@${host}:${port}`;
}

export function drawByApi(ctx: SimContext, params: In<'DrawByApi'>): unknown {
  const main = mainByEither(ctx, undefined, params.appUsername);
  const product = dynamicProduct(ctx, params.productNo, params.proxyType);
  if (product.ipWhiteList !== 1) throw new SimError(CODE.INVALID_PARAMS, 'the product has no whitelist draw');
  checkRegion(product, params.addressCode, product.apiDrawGlobalRandom);
  const num = params.num ?? 1;
  if (num > MAX_DRAW) throw new SimError(CODE.INVALID_PARAMS, `num above ${MAX_DRAW}`);
  const token = ctx.state.token(24);
  ctx.state.extractTokens.set(token, {
    account: main.appUsername,
    productNo: product.productNo,
    num,
    protocol: params.protocol ?? 'socks5',
    returnType: params.returnType ?? 'txt',
    delimiter: params.delimiter ?? 1,
    addressCode: params.addressCode ?? '',
  });
  return { list: [{ proxyUrl: `${ctx.baseUrl()}/sim/extract/${token}` }] };
}

const DELIMITERS: Record<number, string> = { 1: '\r\n', 2: '/br', 3: '\r', 4: '\n', 5: '\t' };

export interface Extracted {
  contentType: string;
  body: string;
}

const refusal = (code: number, msg: string): Extracted => ({ contentType: 'application/json', body: JSON.stringify({ code, msg }) });

/** GET /sim/extract/<token> from clientIp. */
export async function extract(ctx: SimContext, token: string, clientIp: string): Promise<Extracted> {
  const t = ctx.state.extractTokens.get(token);
  if (!t) return refusal(CODE.INVALID_PARAMS, 'unknown extraction link');
  // A password draw's link: the lines were drawn (and charged) by DrawByPwd; no whitelist applies.
  if (t.lines) return { contentType: 'text/plain', body: t.lines.join('\r\n') };
  const main = ctx.state.mains.get(t.account);
  const product = ctx.state.product(t.productNo);
  const b = main?.balances.get(t.productNo);
  const ip = clientIp.startsWith('::ffff:') ? clientIp.slice(7) : clientIp;
  if (!main || !product) return refusal(CODE.USER_NOT_FOUND, 'account or product no longer exists');
  if (!b || b.whitelist.length === 0) return refusal(CODE.INVALID_PARAMS, 'the whitelist is empty: add this address first');
  if (!b.whitelist.includes(ip)) return refusal(CODE.INVALID_PARAMS, `${ip} is not on the whitelist`);
  if (product.ipCount > 0) {
    if (b.ipTotal - b.ipUsed < t.num) return refusal(CODE.ALLOCATE_BALANCE, 'not enough IPs');
    b.ipUsed += t.num;
  } else if (b.usedBytes >= b.totalBytes) return refusal(CODE.ALLOCATE_BALANCE, 'balance exhausted');
  const host = ctx.upstreams?.host ?? '127.0.0.1';
  const port = ctx.upstreams ? await ctx.upstreams.whitelistPort(t.account, t.productNo) : 0;
  const entries = Array.from({ length: t.num }, () => ({ ip: host, port }));
  if (t.returnType === 'json') return { contentType: 'application/json', body: JSON.stringify({ code: 0, msg: 'success', data: entries }) };
  return { contentType: 'text/plain', body: entries.map((e) => `${e.ip}:${e.port}`).join(DELIMITERS[t.delimiter] ?? '\r\n') };
}
