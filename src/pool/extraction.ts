// Reads a DrawByApi extraction link (seed 4.16): the platform answers DrawByApi with URLs, and fetching one
// returns the proxies as text (delimiter 1=CRLF, 2=`/br`, 3=CR, 4=LF, 5=TAB) or JSON. The JSON shape is shown
// nowhere, so the common shapes of extraction APIs are accepted. A body that holds no proxy at all is the
// supplier's error message (whitelist missing, balance exhausted…): it becomes an ExtractionError with that
// text, redacted and truncated.
import { redactText } from '../telemetry/logger.ts';
import { parseProxyString, ProxyStringError, type ParsedProxy } from './proxy-string.ts';
import type { UpstreamProtocol } from './types.ts';
import { RotorError } from '../errors/rotor-error.ts';

export type ExtractionProblem = 'timeout' | 'transport' | 'http_status' | 'too_large' | 'error_body' | 'no_proxies';

export class ExtractionError extends RotorError {
  constructor(
    readonly problem: ExtractionProblem,
    message: string,
    /** The supplier's own text (redacted, truncated), when it sent one. */
    readonly body?: string,
    options?: { cause?: unknown },
  ) {
    super('EXTRACTION_FAILED', message, { httpStatus: 502, ...(options?.cause !== undefined ? { cause: options.cause } : {}) });
  }
}

const BODY_SNIPPET = 200;
const MAX_BODY_BYTES = 1 << 20;

function snippet(text: string): string {
  const t = redactText(text.trim()).replace(/\s+/g, ' ');
  return t.length > BODY_SNIPPET ? `${t.slice(0, BODY_SNIPPET)}…` : t;
}

/** Where the link points, without path or query (those may carry keys). */
function where(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '(invalid url)';
  }
}

// Every delimiter of seed 4.16 at once (the request's `delimiter` is advisory for suppliers), plus `<br>`.
// `/br` must not match inside `scheme://br…`, hence the look-behind.
const TXT_SPLIT = /\r\n|\r|\n|\t|(?<![:/])\/br|<br\s*\/?>/i;

export interface ExtractionResult {
  proxies: ParsedProxy[];
  /** Entries that looked like data but did not parse (counted, not fatal while others parse). */
  rejected: number;
}

/** Parses an extraction body already read. */
export function parseExtractionBody(body: string, defaultProtocol: UpstreamProtocol): ExtractionResult {
  const text = body.replace(/^\uFEFF/, '').trim();
  if (text.length === 0) throw new ExtractionError('no_proxies', 'extraction returned an empty body');
  if (text.startsWith('{') || text.startsWith('[')) {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (json !== undefined) return fromJson(json, defaultProtocol, text);
  }
  return fromEntries(
    text
      .split(TXT_SPLIT)
      .map((s) => s.trim())
      .filter((s) => s.length > 0),
    defaultProtocol,
    text,
  );
}

function fromEntries(entries: unknown[], defaultProtocol: UpstreamProtocol, raw: string): ExtractionResult {
  const proxies: ParsedProxy[] = [];
  let rejected = 0;
  for (const entry of entries) {
    const p = entryToProxy(entry, defaultProtocol);
    if (p) proxies.push(p);
    else rejected++;
  }
  if (proxies.length === 0) {
    if (entries.length === 0) throw new ExtractionError('no_proxies', 'extraction returned an empty list');
    const text = snippet(raw);
    throw new ExtractionError('error_body', `extraction returned no proxy: ${text}`, text);
  }
  return { proxies, rejected };
}

function str(v: unknown): string | undefined {
  if (typeof v === 'string' && v.length > 0) return v;
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return undefined;
}

function entryToProxy(entry: unknown, defaultProtocol: UpstreamProtocol): ParsedProxy | undefined {
  try {
    if (typeof entry === 'string') return parseProxyString(entry, defaultProtocol);
    if (entry && typeof entry === 'object') {
      const o = entry as Record<string, unknown>;
      const host = str(o.ip) ?? str(o.host) ?? str(o.server);
      const port = str(o.port);
      if (!host || !port) {
        const whole = str(o.proxy) ?? str(o.proxyUrl) ?? str(o.url);
        return whole ? parseProxyString(whole, defaultProtocol) : undefined;
      }
      const declared = str(o.protocol) ?? str(o.type) ?? str(o.scheme);
      const protocol =
        declared && /^(socks5h?|socks|http|https)$/i.test(declared)
          ? declared.toLowerCase().startsWith('socks')
            ? 'socks5'
            : 'http'
          : defaultProtocol;
      const address = host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
      const parsed = parseProxyString(address, protocol);
      if (/^https$/i.test(declared ?? '')) parsed.tls = true;
      const username = str(o.user) ?? str(o.username) ?? str(o.account);
      const password = str(o.pass) ?? str(o.password) ?? str(o.pwd);
      if (username === undefined) return parsed;
      return password === undefined ? { ...parsed, username } : { ...parsed, username, password };
    }
    return undefined;
  } catch (err) {
    if (err instanceof ProxyStringError) return undefined;
    throw err;
  }
}

const ARRAY_KEYS = ['data', 'list', 'proxies', 'proxy_list', 'result', 'rows', 'items'];

function findArray(json: unknown, depth = 0): unknown[] | undefined {
  if (Array.isArray(json)) return json;
  if (!json || typeof json !== 'object' || depth > 2) return undefined;
  const o = json as Record<string, unknown>;
  for (const k of ARRAY_KEYS) {
    if (k in o) {
      const found = findArray(o[k], depth + 1);
      if (found) return found;
    }
  }
  return undefined;
}

function fromJson(json: unknown, defaultProtocol: UpstreamProtocol, raw: string): ExtractionResult {
  const list = findArray(json);
  if (list && list.length > 0) return fromEntries(list, defaultProtocol, raw);
  const o = json && typeof json === 'object' ? (json as Record<string, unknown>) : {};
  const msg = str(o.msg) ?? str(o.message) ?? str(o.error) ?? str(o.info);
  if (msg !== undefined) {
    const text = snippet(msg);
    const code = str(o.code) ?? str(o.status);
    throw new ExtractionError('error_body', `extraction refused${code === undefined ? '' : ` (${snippet(code)})`}: ${text}`, text);
  }
  if (list) throw new ExtractionError('no_proxies', 'extraction returned an empty list');
  const text = snippet(raw);
  throw new ExtractionError('error_body', `extraction returned no proxy list: ${text}`, text);
}

export interface FetchExtractionOptions {
  defaultProtocol: UpstreamProtocol;
  timeoutMs?: number;
  /** Injected for tests of transport behaviour; node's global fetch by default. */
  fetch?: typeof fetch;
}

async function readCapped(res: Response): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? '0');
  if (declared > MAX_BODY_BYTES) throw new ExtractionError('too_large', `extraction body too large (${declared} bytes)`);
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_BODY_BYTES) {
      await reader.cancel();
      throw new ExtractionError('too_large', `extraction body larger than ${MAX_BODY_BYTES} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Fetches one extraction link and parses what it returns. */
export async function fetchExtraction(url: string, options: FetchExtractionOptions): Promise<ExtractionResult> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const doFetch = options.fetch ?? fetch;
  const signal = AbortSignal.timeout(timeoutMs);
  let body: string;
  let res: Response;
  try {
    res = await doFetch(url, { signal, redirect: 'follow', headers: { accept: 'text/plain, application/json, */*' } });
    body = await readCapped(res);
  } catch (err) {
    if (err instanceof ExtractionError) throw err;
    if (signal.aborted)
      throw new ExtractionError('timeout', `extraction from ${where(url)} timed out after ${timeoutMs} ms`, undefined, { cause: err });
    const reason = err instanceof Error ? ((err.cause as { code?: string } | undefined)?.code ?? err.name) : 'error';
    throw new ExtractionError('transport', `extraction from ${where(url)} failed: ${reason}`, undefined, { cause: err });
  }
  if (!res.ok) {
    const text = snippet(body);
    throw new ExtractionError(
      'http_status',
      `extraction from ${where(url)} answered HTTP ${res.status}${text ? `: ${text}` : ''}`,
      text || undefined,
    );
  }
  return parseExtractionBody(body, options.defaultProtocol);
}
