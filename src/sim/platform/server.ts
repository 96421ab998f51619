// The sandbox's HTTP server: every operation of the table at its path with the envelope of seed part 5, and
// the test routes under /sim. Tolerant like the live service: version "v2" or "2.0", encrypt in any case,
// missing reqId, empty or "{}" params; both POST and GET are answered on the operation paths. A retried reqId
// (same operation and params) of an operation that changes something and has no merchant number (a traffic
// return, an account, a limit, the whitelist) gets its first answer again without being processed
// twice (replays.ts).
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CODE } from '../../platform/codes.ts';
import { AesEnvelope, DecryptError } from '../../platform/envelope.ts';
import { operationByPath, operations, type OperationName, type OperationSpec } from '../../platform/operations.ts';
import type { Fault } from '../contracts.ts';
import type { SimContext } from './context.ts';
import type { FaultControl, Inspect } from './control.ts';
import { extract } from './draws.ts';
import { SimError } from './errors.ts';
import { handlers } from './handlers.ts';
import { Replays } from './replays.ts';
import { REMEMBERED_REPLIES_TTL_MS } from './state.ts';

const MAX_BODY = 1024 * 1024;

/**
 * Operations that change nothing the sandbox saves (persist.ts): every other one marks the state changed
 * after its handler ran (a refused one too: harmless, one write more).
 */
const READS: ReadonlySet<OperationName> = new Set<OperationName>([
  'GetAppInfo',
  'GetArea',
  'GetCityList',
  'GetProjectList',
  'GetProductStock',
  'GetProductInfo',
  'ProductAreaList',
  'GetOrder',
  'GetInstance',
  'GetAssignIpInfo',
  'ProxyInfo',
  'GetProxyUserInfo',
  'ProxyFlowUseLog',
]);

/** Draws: not remembered by reqId (replays.ts holds small answers only; a second draw costs nothing). */
const DRAWS: ReadonlySet<OperationName> = new Set<OperationName>(['DrawByPwd', 'DrawByApi']);

export interface ServerOptions {
  host: string;
  port: number;
  appKey: string;
  appSecret: string;
  ctx: SimContext;
  inspect: Inspect;
  faults: FaultControl;
}

export interface SimServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

type Reply = { reqId: string; code: number; msg: string; data?: string };
/** A reply and whether the operation was handled (answers of handled calls are what a retried reqId gets again). */
type Outcome = { reply: Reply; handled: boolean };

export async function startServer(opts: ServerOptions): Promise<SimServer> {
  const envelope = new AesEnvelope(opts.appSecret);
  const state = opts.ctx.state;
  const replays = new Replays<Outcome>({
    enabled: () => opts.ctx.faults.replayReqIds,
    // Kept with the state file: a sandbox restarted between a call and its retry answers the retry.
    durable: {
      find(reqId, request) {
        const r = state.replies.get(reqId);
        if (r === undefined || Date.now() - r.at >= REMEMBERED_REPLIES_TTL_MS || r.request !== digest(request)) return undefined;
        return { reply: r.reply, handled: true };
      },
      keep(reqId, request, answer) {
        state.rememberReply(reqId, { request: digest(request), reply: answer.reply, at: Date.now() });
      },
    },
  });
  const server = createServer((req, res) => {
    void route(req, res).catch(() => {
      if (!res.headersSent) sendJson(res, 500, { code: 500, msg: 'system error' });
      else res.destroy();
    });
  });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sandbox');
    const body = await readBody(req);
    if (body === null) return sendJson(res, 413, { code: CODE.INVALID_PARAMS, msg: 'body too large' });
    if (url.pathname.startsWith('/sim/')) return simRoute(opts, req, res, url, body);
    const name = operationByPath(url.pathname);
    if (!name) return sendJson(res, 404, { code: 404, msg: 'no such operation' });
    if (req.method !== 'POST' && req.method !== 'GET') return sendJson(res, 405, { code: 405, msg: 'method not allowed' });
    const reply = await operate(opts, envelope, replays, name, body);
    if (opts.ctx.faults.takeDrop(name)) {
      req.socket.destroy();
      return;
    }
    sendJson(res, 200, reply);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // Embedded, the sandbox shares the daemon's process: a failed accept (EMFILE…) must not end it. The server
  // goes on accepting by itself.
  server.on('error', noop);
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendFound(res: ServerResponse, value: unknown): void {
  if (value === undefined) sendJson(res, 404, { error: 'not found' });
  else sendJson(res, 200, value);
}

function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(null);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function noop(): void {}

/** What a remembered reqId keeps of its request (the params ciphertext can be long). */
function digest(request: string): string {
  return createHash('sha256').update(request).digest('base64');
}

/** One platform operation: the envelope checked and opened, the parameters validated, the handler run. */
async function operate(
  opts: ServerOptions,
  envelope: AesEnvelope,
  replays: Replays<Outcome>,
  name: OperationName,
  body: string,
): Promise<Reply> {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    return { reqId: '', code: CODE.INVALID_PARAMS, msg: 'request body is not JSON' };
  }
  const env = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  const reqId = typeof env.reqId === 'string' ? env.reqId : '';
  const fail = (code: number, msg: string): Reply => ({ reqId, code, msg });
  if (env.appKey !== opts.appKey) return fail(CODE.DECRYPT, 'decryption failed (unknown appKey)');
  const version = String(env.version ?? 'v2');
  if (version !== 'v2' && version !== '2.0') return fail(CODE.INVALID_PARAMS, `unsupported version ${version}`);
  const encrypt = String(env.encrypt ?? 'aes').toLowerCase();
  if (encrypt !== 'aes') return fail(CODE.INVALID_PARAMS, `unsupported encrypt ${encrypt}`);
  let params: unknown = {};
  if (typeof env.params === 'string' && env.params.length > 0) {
    try {
      params = envelope.decryptJson(env.params);
    } catch (err) {
      if (err instanceof DecryptError) return fail(CODE.DECRYPT, 'decryption failed (check the secret)');
      throw err;
    }
  } else if (env.params !== undefined && env.params !== null && env.params !== '') {
    return fail(CODE.INVALID_PARAMS, 'params must be a base64 string');
  }
  if (params === null) params = {};
  opts.ctx.calls.set(name, (opts.ctx.calls.get(name) ?? 0) + 1);
  const faults = opts.ctx.faults;
  const parsedParams = params;
  const request = `${name}\n${typeof env.params === 'string' ? env.params : ''}`;
  // Reads answer the current state; operations keyed by a merchant number answer as the seed says for a
  // duplicate number (the existing order or change order state); a draw drawn twice moves no money and its
  // answers (lines) are the largest: only the others remember reqIds.
  const replayable = !READS.has(name) && !DRAWS.has(name) && (operations[name] as OperationSpec).merchantNo === undefined;
  const outcome = await replays.answer(
    replayable ? reqId : '',
    request,
    async (): Promise<Outcome> => {
      if (!faults.enter()) return { reply: fail(CODE.SYSTEM, 'system error (too many requests at once)'), handled: false };
      try {
        return await handle(opts, envelope, name, parsedParams, reqId);
      } finally {
        faults.leave();
      }
    },
    (o) => o.handled,
  );
  return outcome.reply;
}

/** The call's latency, failure knob, parameters and handler (one call counted in flight meanwhile). */
async function handle(opts: ServerOptions, envelope: AesEnvelope, name: OperationName, params: unknown, reqId: string): Promise<Outcome> {
  const fail = (code: number, msg: string): Outcome => ({ reply: { reqId, code, msg }, handled: true });
  await opts.ctx.faults.hold();
  if (opts.ctx.faults.takeFail(name)) return { reply: { reqId, code: CODE.SYSTEM, msg: 'system error' }, handled: false };
  const parsed = operations[name].request.safeParse(params);
  if (!parsed.success) {
    const issues = parsed.error.issues;
    const code = issues.some((i) => i.path[0] === 'sessTime') ? CODE.SESS_TIME_RANGE : CODE.INVALID_PARAMS;
    return fail(code, `invalid parameters: ${issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  }
  try {
    const handler = handlers[name] as (ctx: SimContext, p: unknown) => unknown;
    const data = handler(opts.ctx, parsed.data);
    if (operations[name].response === null) return { reply: { reqId, code: CODE.OK, msg: 'success' }, handled: true };
    return { reply: { reqId, code: CODE.OK, msg: 'success', data: envelope.encryptJson(data) }, handled: true };
  } catch (err) {
    if (err instanceof SimError) return fail(err.platformCode, err.message);
    return { reply: { reqId, code: CODE.SYSTEM, msg: 'system error' }, handled: false };
  } finally {
    if (!READS.has(name)) opts.ctx.state.touch();
  }
}

/** The sandbox's own routes under /sim/: inspection (GET), faults and test controls (POST, PUT, DELETE). */
async function simRoute(opts: ServerOptions, req: IncomingMessage, res: ServerResponse, url: URL, body: string): Promise<void> {
  const parts = url.pathname.split('/').filter(Boolean).slice(1).map(decodeURIComponent);
  const method = req.method ?? 'GET';
  let input: Record<string, unknown> = {};
  if (body) {
    try {
      input = JSON.parse(body) as Record<string, unknown>;
    } catch {
      return sendJson(res, 400, { error: 'body is not JSON' });
    }
  }
  const q = (k: string) => url.searchParams.get(k) ?? undefined;
  const [head, arg, tail] = parts;
  const { inspect, faults } = opts;
  if (head === 'extract' && arg) {
    const out = await extract(opts.ctx, arg, req.socket.remoteAddress ?? '');
    opts.ctx.state.touch();
    res.writeHead(200, { 'content-type': out.contentType });
    res.end(out.body);
    return;
  }
  if (method === 'GET') {
    switch (head) {
      case 'merchant':
        return sendJson(res, 200, inspect.merchant());
      case 'charges':
        return sendJson(res, 200, inspect.charges(q('no')));
      case 'callbacks':
        return sendJson(res, 200, inspect.callbacks({ type: q('type'), no: q('no') }));
      case 'orders':
        return arg ? sendFound(res, inspect.order(arg)) : sendJson(res, 200, inspect.orders());
      case 'instances':
        return sendJson(res, 200, inspect.instances());
      case 'accounts':
        return sendJson(res, 200, inspect.accounts());
      case 'balances':
        return sendJson(res, 200, inspect.balances());
      case 'clock':
        return sendJson(res, 200, { now: inspect.now(), speed: opts.ctx.clock.speed });
      case 'calls':
        return sendJson(res, 200, inspect.calls());
      case 'in-flight':
        return sendJson(res, 200, inspect.inFlight());
    }
  }
  if (method === 'POST' || method === 'PUT') {
    switch (head) {
      case 'faults':
        faults.set(input);
        return sendJson(res, 200, { ok: true });
      case 'upstreams':
        faults.upstream(input.port === '*' ? '*' : Number(input.port), (input.fault ?? null) as Fault | null);
        return sendJson(res, 200, { ok: true });
      case 'clock':
        if (typeof input.speed === 'number') faults.clockSpeed(input.speed);
        if (typeof input.advanceMs === 'number') faults.advanceClock(input.advanceMs);
        return sendJson(res, 200, { now: inspect.now(), speed: opts.ctx.clock.speed });
      case 'merchant':
        faults.setMerchant(input);
        return sendJson(res, 200, inspect.merchant());
      case 'products':
        return sendFound(res, arg && faults.updateProduct(arg, input) ? { ok: true } : undefined);
      case 'instances':
        if (tail === 'status') return sendFound(res, arg && faults.setInstanceStatus(arg, Number(input.status)) ? { ok: true } : undefined);
    }
  }
  if (method === 'DELETE' && head === 'accounts' && arg) return sendFound(res, faults.deleteSubAccount(arg) ? { ok: true } : undefined);
  if (method === 'DELETE' && head === 'faults') {
    faults.reset();
    return sendJson(res, 200, { ok: true });
  }
  sendJson(res, 404, { error: 'no such sandbox route' });
}
