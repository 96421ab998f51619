// The admin API from the page: same origin, the admin token as a bearer header, errors kept as the API
// gave them ({"error":{"code","message","platformCode"}}) so the page can show them word for word.
const KEY = 'rotor.adminToken';

export const session = {
  token: () => sessionStorage.getItem(KEY),
  save: (token) => sessionStorage.setItem(KEY, token),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, code, message, platformCode) {
    super(message);
    this.status = status;
    this.code = code;
    this.platformCode = platformCode;
  }
}

const unauthorizedListeners = new Set();
/** Called with the error whenever the API answers 401 (the token is missing, wrong or was changed). */
export function onUnauthorized(listener) {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

/** JSON from the admin API; rejects with ApiError (status 0 when the server did not answer). */
export async function api(path, { method = 'GET', body, token = session.token(), withHeaders = false } = {}) {
  const headers = { accept: 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  } catch (err) {
    throw new ApiError(0, 'NETWORK', `the admin server did not answer (${err.message})`);
  }
  const text = await res.text();
  let data = text;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: kept as text
  }
  if (res.ok) return withHeaders ? { data, headers: res.headers } : data;
  const e = data && typeof data === 'object' && data.error ? data.error : {};
  const error = new ApiError(
    res.status,
    e.code ?? `HTTP_${res.status}`,
    e.message ?? (typeof data === 'string' && data ? data : res.statusText),
    e.platformCode,
  );
  if (res.status === 401) for (const l of unauthorizedListeners) l(error);
  throw error;
}

/** Query string from an object, leaving out empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** A list answered either as an array or as {items, next}. */
export const itemsOf = (data) => (Array.isArray(data) ? data : Array.isArray(data?.items) ? data.items : []);
