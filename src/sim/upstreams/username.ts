// The drawn gateway user name: `<account>-prod-<productNo>-sess-<sessionId>-time-<sessTime>[-area-<code>]`.
// '-' separates fields, so every field is written in [A-Za-z0-9_.] and any other character as `~` plus the
// two lower-case hex digits of each of its UTF-8 bytes; a negative sessTime is written `n<minutes>`
// (`time-n1` for -1). Decoding accepts exactly this shape and nothing else.
import type { DrawnCredential } from '../contracts.ts';
import { UpstreamError } from './errors.ts';

const FIELD = /^(?:[A-Za-z0-9_.]|~[0-9a-f]{2})+$/;
const SESS_TIME = /^(?:0|n?[1-9][0-9]{0,5})$/;
const PLAIN = /[A-Za-z0-9_.]/;

function escapeField(value: string): string {
  let out = '';
  for (const ch of value) {
    if (PLAIN.test(ch)) out += ch;
    else for (const byte of Buffer.from(ch, 'utf8')) out += `~${byte.toString(16).padStart(2, '0')}`;
  }
  return out;
}

function unescapeField(field: string): string | null {
  if (!FIELD.test(field)) return null;
  if (!field.includes('~')) return field;
  const bytes: number[] = [];
  for (let i = 0; i < field.length; i++) {
    if (field[i] === '~') {
      bytes.push(parseInt(field.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(field.charCodeAt(i));
  }
  const text = Buffer.from(bytes).toString('utf8');
  // A byte run that is not UTF-8 would decode to U+FFFD and no longer round-trip: not ours.
  return escapeField(text) === field ? text : null;
}

export function encodeUsername(credential: DrawnCredential): string {
  const { account, productNo, sessionId, sessTime, addressCode } = credential;
  if (!account || !productNo || !sessionId) {
    throw new UpstreamError('UPSTREAM_BAD_CREDENTIAL', 'a drawn credential needs an account, a product and a session');
  }
  if (!Number.isInteger(sessTime) || Math.abs(sessTime) > 999_999) {
    throw new UpstreamError('UPSTREAM_BAD_CREDENTIAL', 'sessTime must be an integer number of minutes');
  }
  const time = sessTime < 0 ? `n${-sessTime}` : String(sessTime);
  let name = `${escapeField(account)}-prod-${escapeField(productNo)}-sess-${escapeField(sessionId)}-time-${time}`;
  if (addressCode) name += `-area-${escapeField(addressCode)}`;
  return name;
}

/** The credential a user name carries, or null when it is not one of ours. */
export function decodeUsername(username: string): DrawnCredential | null {
  const parts = username.split('-');
  if (parts.length !== 7 && parts.length !== 9) return null;
  if (parts[1] !== 'prod' || parts[3] !== 'sess' || parts[5] !== 'time') return null;
  if (parts.length === 9 && parts[7] !== 'area') return null;
  const account = unescapeField(parts[0]!);
  const productNo = unescapeField(parts[2]!);
  const sessionId = unescapeField(parts[4]!);
  const time = parts[6]!;
  if (account === null || productNo === null || sessionId === null || !SESS_TIME.test(time)) return null;
  const sessTime = time.startsWith('n') ? -Number(time.slice(1)) : Number(time);
  const credential: DrawnCredential = { account, productNo, sessionId, sessTime };
  if (parts.length === 9) {
    const addressCode = unescapeField(parts[8]!);
    if (addressCode === null) return null;
    credential.addressCode = addressCode;
  }
  return credential;
}
