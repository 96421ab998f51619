// `rotor call` in embedded mode: the sandbox the running daemon holds is in that daemon's memory, so a call
// must go through the daemon to see its accounts and orders. It is sent to the daemon's admin escape hatch
// (POST /v1/platform/<operation> on admin.host:port, with admin.token), and the answer is read back as the
// platform's own. When no Rotor daemon answers there, the caller falls back to a throwaway sandbox (and says
// so on stderr).
import type { Config } from '../config/schema.ts';
import { ConfigError } from '../config/load.ts';
import { PlatformError, RequestInvalidError, TransportError, UnknownOperationError } from '../platform/errors.ts';

export type DaemonAnswer = { reached: true; data: unknown; url: string } | { reached: false; why: string };

interface AdminErrorBody {
  error: { code: string; message: string; platformCode?: number };
}

/** The address to connect to for a listening host: a wildcard means this machine. */
function connectHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '::1';
  return host;
}

const isAdminError = (v: unknown): v is AdminErrorBody =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as AdminErrorBody).error?.code === 'string' &&
  typeof (v as AdminErrorBody).error?.message === 'string';

/**
 * Sends the call to the running daemon. Resolves `reached: false` when nothing (or something that is not
 * Rotor's admin API) answers; rejects with the platform client's own error types when the daemon answered
 * with a failure, so the exit codes stay those of a direct call.
 */
export async function callThroughDaemon(
  admin: Config['admin'],
  operation: string,
  params: unknown,
  timeoutMs: number,
): Promise<DaemonAnswer> {
  if (admin.port === 0) return { reached: false, why: 'admin.port is 0 (no fixed address to reach a daemon at)' };
  const host = connectHost(admin.host);
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${admin.port}/v1/platform/${encodeURIComponent(operation)}`;
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(admin.token ? { authorization: `Bearer ${admin.token}` } : {}) },
      body: JSON.stringify(params ?? {}),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    const code = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
    return { reached: false, why: `no daemon answered on ${url.slice(0, url.indexOf('/v1/'))} (${code})` };
  }
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    return { reached: false, why: `${url.slice(0, url.indexOf('/v1/'))} answered, but not as Rotor's admin API` };
  }
  if (res.ok && typeof body === 'object' && body !== null && 'operation' in body)
    return { reached: true, data: (body as { data?: unknown }).data ?? null, url };
  if (!isAdminError(body)) return { reached: false, why: `${url.slice(0, url.indexOf('/v1/'))} answered, but not as Rotor's admin API` };
  const { code, message, platformCode } = body.error;
  if (res.status === 401) throw new ConfigError([{ key: 'admin.token', problem: `the running daemon refused it (${message})` }]);
  if (code === 'PLATFORM_ERROR' && platformCode !== undefined) {
    // The admin message is "<op>: platform refused with <code>: <platform msg>".
    const platformMsg = message.replace(/^.*?platform refused with -?\d+: /, '');
    throw new PlatformError({ operation, reqId: undefined, platformCode, platformMsg });
  }
  if (code === 'UNKNOWN_OPERATION') throw new UnknownOperationError(operation);
  if (res.status === 400) throw new RequestInvalidError(operation, [{ path: '', message }]);
  throw new TransportError({ operation, reqId: undefined, reason: 'network', detail: `through the running daemon: ${code}: ${message}` });
}
