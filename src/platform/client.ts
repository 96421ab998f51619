// The Open API v2 client. Every call: validate the request against the operation's schema (part 8 limits
// included) before anything is sent; encrypt once; POST the envelope; retry transient failures with the SAME
// reqId and the SAME ciphertext (seed part 5) — for an operation marked `resend: 'unsent'` (DynamicProxyReturn)
// only failures where the request never reached the platform; never parse `data` of a non-200 answer; decrypt and read the
// answer leniently. Unlike the provider's SDK it treats HTTP >= 400 as a failure, tolerates 200 without data,
// survives a wrong secret, and keeps the reqId across retries.
import http from 'node:http';
import https from 'node:https';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AesEnvelope, DecryptError, type ApiVersion } from './envelope.ts';
import { isOperationName, operations, type OperationName, type OperationSpec, type OpRequest, type OpResponse } from './operations.ts';
import {
  ClientConfigError,
  DecryptReplyError,
  EmptyReplyError,
  PlatformClientError,
  PlatformError,
  RequestInvalidError,
  ResponseInvalidError,
  TransportError,
  UnknownOperationError,
  fieldIssues,
  neverReached,
  type TransportReason,
} from './errors.ts';
import { DEFAULT_BACKOFF, withRetries, type Backoff } from './retry.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Logger } from '../telemetry/logger.ts';

export interface PlatformClientOptions {
  baseUrl: string;
  appKey: string;
  /** 16, 24 or 32 bytes; selects AES-128/192/256. */
  appSecret: string;
  version?: ApiVersion;
  encrypt?: string;
  /** Per attempt, from sending to the whole reply read. */
  timeoutMs?: number;
  /** Retries after the first attempt. */
  retries?: number;
  backoff?: Backoff;
  logger?: Logger;
  metrics?: Metrics;
  reqIdFactory?: () => string;
  /** Replies larger than this are refused (a misbehaving endpoint must not exhaust memory). */
  maxReplyBytes?: number;
}

type Endpoint = Pick<PlatformClientOptions, 'baseUrl' | 'appKey' | 'appSecret' | 'version' | 'encrypt'>;

/** Where and how to reach the platform, picked from its settings (the config's `platform` block). */
export function platformEndpoint(settings: Endpoint): Endpoint {
  const { baseUrl, appKey, appSecret, version, encrypt } = settings;
  return { baseUrl, appKey, appSecret, version, encrypt };
}

export interface CallOptions {
  /** Reuse a reqId (e.g. the one persisted with an order before a crash). */
  reqId?: string;
  signal?: AbortSignal;
  /**
   * Told of each failed attempt that is retried (a timeout, HTTP 429 or 5xx, code 500): the platform answers
   * like an overloaded one, and a caller running many calls at once may run fewer (src/users/sub-account.ts).
   */
  onRetry?: (error: Error) => void;
}

/** What one exchange produced: the reqId used and the decrypted `data` (undefined when the reply had none). */
interface Exchange {
  reqId: string;
  payload: unknown;
}

interface HttpReply {
  status: number;
  body: string;
}

const DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024;

export class PlatformClient {
  private readonly base: string;
  private readonly appKey: string;
  private readonly envelope: AesEnvelope;
  private readonly version: ApiVersion;
  private readonly encryptName: string;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly backoff: Backoff;
  private readonly logger: Logger | undefined;
  private readonly metrics: Metrics | undefined;
  private readonly newReqId: () => string;
  private readonly maxReplyBytes: number;
  private readonly agent: http.Agent;
  private readonly transport: typeof http | typeof https;
  /** Where each operation's requests go, parsed once per path (not one URL parse per call). */
  private readonly targets = new Map<string, http.RequestOptions>();
  /** Lookups this platform answered HTTP 405 for a POST: sent as GET from then on (operations.ts `lookup`). */
  private readonly getLookups = new Set<OperationName>();

  constructor(options: PlatformClientOptions) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw new ClientConfigError('baseUrl', 'not a valid URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ClientConfigError('baseUrl', 'must be http:// or https://');
    if (!options.appKey) throw new ClientConfigError('appKey', 'must not be empty');
    const timeoutMs = options.timeoutMs ?? 10_000;
    if (!(timeoutMs > 0)) throw new ClientConfigError('timeoutMs', 'must be positive');
    const retries = options.retries ?? 3;
    if (!Number.isInteger(retries) || retries < 0) throw new ClientConfigError('retries', 'must be a whole number >= 0');

    this.envelope = new AesEnvelope(options.appSecret);
    this.base = url.href.replace(/\/+$/, '');
    this.appKey = options.appKey;
    this.version = options.version ?? 'v2';
    this.encryptName = options.encrypt ?? 'aes';
    this.timeoutMs = timeoutMs;
    this.retries = retries;
    this.backoff = options.backoff ?? DEFAULT_BACKOFF;
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.newReqId = options.reqIdFactory ?? (() => randomUUID().replaceAll('-', ''));
    this.maxReplyBytes = options.maxReplyBytes ?? DEFAULT_MAX_REPLY_BYTES;
    this.transport = url.protocol === 'https:' ? https : http;
    // Room for a batch's sub-account calls (src/users/sub-account.ts: at most SUB_ACCOUNT_WINDOW_MAX at once)
    // beside the data path's draws, which would otherwise queue behind them.
    this.agent = new this.transport.Agent({ keepAlive: true, maxSockets: 128 });
  }

  /** Calls one operation; resolves with the parsed answer (null for operations that answer without data). */
  async call<N extends OperationName>(name: N, params: OpRequest<N>, options: CallOptions = {}): Promise<OpResponse<N>> {
    const spec: OperationSpec = operations[name];
    const { reqId, payload } = await this.exchange(name, params, options);
    if (spec.response === null) return null as OpResponse<N>;
    let value = payload;
    if (value === undefined || value === null) {
      // A Go platform marshals an empty list as null (or omits data): for list answers that is "none".
      if (spec.response instanceof z.ZodArray) value = [];
      else throw new EmptyReplyError(name, reqId);
    }
    const parsed = spec.response.safeParse(value);
    if (!parsed.success) throw new ResponseInvalidError(name, reqId, fieldIssues(parsed.error));
    return parsed.data as OpResponse<N>;
  }

  /**
   * Calls an operation by name with unchecked-typed params (still validated against the schema) and
   * resolves with the decrypted answer exactly as the platform sent it, or null when it sent no data.
   * For `rotor call` and the admin escape hatch, which show the platform's own words.
   */
  async callRaw(name: string, params: unknown, options: CallOptions = {}): Promise<unknown> {
    if (!isOperationName(name)) throw new UnknownOperationError(name);
    const { payload } = await this.exchange(name, params, options);
    return payload ?? null;
  }

  /** Closes kept-alive connections. */
  close(): void {
    this.agent.destroy();
  }

  private async exchange(name: OperationName, params: unknown, options: CallOptions): Promise<Exchange> {
    const spec: OperationSpec = operations[name];
    const checked = spec.request.safeParse(params ?? {});
    if (!checked.success) throw new RequestInvalidError(name, fieldIssues(checked.error));

    const reqId = options.reqId ?? this.newReqId();
    // Encrypted once: every retry sends byte-identical params under the same reqId.
    const body = JSON.stringify({
      version: this.version,
      encrypt: this.encryptName,
      appKey: this.appKey,
      reqId,
      params: this.envelope.encryptJson(checked.data),
    });
    const target = this.target(spec.path);
    const started = performance.now();
    try {
      const payload = await withRetries((attempt) => this.attempt(name, target, body, reqId, attempt, options.signal), {
        retries: this.retries,
        backoff: this.backoff,
        signal: options.signal,
        ...(spec.resend === 'unsent' ? { retryable: neverReached } : {}),
        onRetry: (error, attempt) => {
          this.logger?.warn(
            { operation: name, reqId, attempt, err: { code: (error as PlatformClientError).code, message: error.message } },
            'platform call failed, retrying',
          );
          options.onRetry?.(error);
        },
      });
      return { reqId, payload };
    } catch (err) {
      if (err instanceof PlatformClientError) throw err;
      // p-retry rejects with the signal's reason when the caller aborts during a backoff.
      throw new TransportError({ operation: name, reqId, reason: 'aborted', detail: 'aborted by the caller', cause: err });
    } finally {
      this.metrics?.platformRequestSeconds.observe({ operation: name }, (performance.now() - started) / 1000);
    }
  }

  /** The request options of an operation's path (host, port, path), parsed from the base URL once. */
  private target(path: string): http.RequestOptions {
    let t = this.targets.get(path);
    if (t === undefined) {
      const url = new URL(this.base + path);
      t = {
        protocol: url.protocol,
        // An IPv6 literal comes bracketed in a URL, bare in request options.
        hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        ...(url.username ? { auth: `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` } : {}),
      };
      this.targets.set(path, t);
    }
    return t;
  }

  /** One HTTP exchange; resolves with the decrypted data, throws a typed error otherwise. */
  private async attempt(
    name: OperationName,
    target: http.RequestOptions,
    body: string,
    reqId: string,
    attempt: number,
    signal: AbortSignal | undefined,
  ): Promise<unknown> {
    const t0 = performance.now();
    let label = 'transport';
    try {
      const reply = await this.send(name, target, body, reqId, signal);
      // HTTP 429: too many requests, whatever the body says (nothing was done; retried after a backoff).
      if (reply.status === 429)
        throw new TransportError({ operation: name, reqId, reason: 'http_status', detail: 'HTTP 429', responseStatus: 429 });
      const envelope = readEnvelope(reply.body);
      if (envelope === undefined) {
        throw new TransportError({
          operation: name,
          reqId,
          reason: reply.status >= 400 ? 'http_status' : 'bad_envelope',
          detail: reply.status >= 400 ? `HTTP ${reply.status}` : `HTTP ${reply.status} with a body that is not a response envelope`,
          responseStatus: reply.status,
        });
      }
      label = String(envelope.code);
      if (envelope.reqId !== undefined && envelope.reqId !== reqId) {
        this.logger?.warn({ operation: name, reqId, replyReqId: envelope.reqId }, 'platform answered with another reqId');
      }
      if (envelope.code !== 200) {
        throw new PlatformError({ operation: name, reqId, platformCode: envelope.code, platformMsg: envelope.msg });
      }
      if (reply.status >= 400) {
        label = 'transport';
        throw new TransportError({
          operation: name,
          reqId,
          reason: 'http_status',
          detail: `HTTP ${reply.status} with code 200`,
          responseStatus: reply.status,
        });
      }
      // An operation that answers "without encrypted data" (seed 4.18, part 5 rule 5): code 200 is the whole
      // answer. Whatever a platform puts in `data` there ({} from a Go service's shared helper, "success") is not read.
      const payload = operations[name].response === null ? undefined : this.decryptData(name, reqId, envelope.data);
      this.logger?.debug({ operation: name, reqId, attempt, code: 200, ms: Math.round(performance.now() - t0) }, 'platform call');
      return payload;
    } catch (err) {
      if (err instanceof TransportError && err.reason === 'timeout') label = 'timeout';
      else if (err instanceof DecryptReplyError) label = 'decrypt';
      this.logger?.debug({ operation: name, reqId, attempt, code: label, ms: Math.round(performance.now() - t0) }, 'platform call failed');
      throw err;
    } finally {
      this.metrics?.platformRequests.inc({ operation: name, code: label });
    }
  }

  private decryptData(name: OperationName, reqId: string, data: unknown): unknown {
    if (data === undefined || data === null || data === '') return undefined;
    if (typeof data !== 'string') throw new DecryptReplyError(name, reqId, '`data` is not a string');
    try {
      return this.envelope.decryptJson(data);
    } catch (err) {
      if (err instanceof DecryptError) throw new DecryptReplyError(name, reqId, err.message.replace(/^cannot decrypt: /, ''));
      throw err;
    }
  }

  /**
   * POSTs the envelope; a lookup the platform serves on GET only (HTTP 405 for the POST) is sent again at once as
   * GET, with the envelope's fields in the query string, and remembered (one POST per lookup per process).
   */
  private async send(
    name: OperationName,
    target: http.RequestOptions,
    body: string,
    reqId: string,
    signal: AbortSignal | undefined,
  ): Promise<HttpReply> {
    if (this.getLookups.has(name)) return this.post(name, withQuery(target, body), undefined, reqId, signal);
    const reply = await this.post(name, target, body, reqId, signal);
    if (reply.status !== 405 || (operations[name] as OperationSpec).lookup !== true) return reply;
    this.getLookups.add(name);
    this.logger?.info({ operation: name }, 'the platform answered HTTP 405 for a POST of this lookup: sent as GET from now on');
    return this.post(name, withQuery(target, body), undefined, reqId, signal);
  }

  /** One HTTP exchange: POST with `body`, or GET (`body` undefined, the envelope already in the target's query). */
  private post(
    name: OperationName,
    target: http.RequestOptions,
    body: string | undefined,
    reqId: string,
    signal: AbortSignal | undefined,
  ): Promise<HttpReply> {
    return new Promise<HttpReply>((resolve, reject) => {
      let settled = false;
      const fail = (reason: TransportReason, detail: string, cause?: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        req.destroy();
        reject(new TransportError({ operation: name, reqId, reason, detail, cause }));
      };
      const onAbort = () => fail('aborted', 'aborted by the caller');
      if (signal?.aborted) {
        reject(new TransportError({ operation: name, reqId, reason: 'aborted', detail: 'aborted by the caller' }));
        return;
      }
      const req = this.transport.request({
        ...target,
        method: body === undefined ? 'GET' : 'POST',
        agent: this.agent,
        headers:
          body === undefined
            ? { accept: 'application/json' }
            : { 'content-type': 'application/json', accept: 'application/json', 'content-length': Buffer.byteLength(body) },
      });
      const timer = setTimeout(() => fail('timeout', `no complete answer within ${this.timeoutMs} ms`), this.timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      req.on('error', (err: NodeJS.ErrnoException) => fail(classify(err), err.code ?? err.message, err));
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > this.maxReplyBytes) fail('too_large', `reply larger than ${this.maxReplyBytes} bytes`);
          else chunks.push(chunk);
        });
        res.on('error', (err: NodeJS.ErrnoException) => fail(classify(err), err.code ?? err.message, err));
        res.on('aborted', () => fail('reset', 'reply cut off'));
        res.on('end', () => {
          if (settled) return;
          if (!res.complete) {
            fail('reset', 'reply cut off');
            return;
          }
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
        });
      });
      req.end(body);
    });
  }
}

/** The target with the envelope's fields (version, encrypt, appKey, reqId, params) in its query string. */
function withQuery(target: http.RequestOptions, body: string): http.RequestOptions {
  const fields = JSON.parse(body) as Record<string, string>;
  const path = target.path ?? '/';
  return { ...target, path: `${path}${path.includes('?') ? '&' : '?'}${new URLSearchParams(fields).toString()}` };
}

function classify(err: NodeJS.ErrnoException): TransportReason {
  const code = err.code ?? '';
  if (code === 'ECONNREFUSED') return 'refused';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED') return 'reset';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns';
  if (code === 'ETIMEDOUT') return 'timeout';
  if (code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || code.includes('CERT') || code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE')
    return 'tls';
  return 'network';
}

interface ReplyEnvelope {
  reqId: string | undefined;
  code: number;
  msg: string;
  data: unknown;
}

/** The response envelope of seed part 5, or undefined when the body is not one. `code` may arrive as a string. */
function readEnvelope(body: string): ReplyEnvelope | undefined {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const o = value as Record<string, unknown>;
  const code =
    typeof o.code === 'number' ? o.code : typeof o.code === 'string' && /^-?\d+$/.test(o.code.trim()) ? Number(o.code) : undefined;
  if (code === undefined || !Number.isInteger(code)) return undefined;
  return {
    reqId: typeof o.reqId === 'string' ? o.reqId : undefined,
    code,
    msg: typeof o.msg === 'string' ? o.msg : '',
    data: o.data,
  };
}
