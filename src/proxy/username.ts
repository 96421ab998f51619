// The proxy user name carries routing options (docs/reference.md, "Local proxy users"):
//   <user>[-session-<id>][-strict-1][-sesstime-<minutes>][-region-<addressCode>][-product-<productNo>][-instance-<instanceNo>]
// `-strict-1` makes a sticky session strict: when its exit fails the connection fails (502) instead of
// moving the session to another exit; `-strict-0` (the default) is a soft session.
// Options are read from the right; what remains is the user. A local user name may itself contain '-', so
// when the caller can say which names are users, a remainder like "alice-colour-red" is told apart from a
// user called "alice-colour-red": if "alice" is a user, "colour" is reported as an unknown option.

export const USERNAME_OPTIONS = ['session', 'sesstime', 'region', 'product', 'instance', 'strict'] as const;
export type UsernameOption = (typeof USERNAME_OPTIONS)[number];

export interface UsernameOptions {
  sessionId?: string;
  /** a strict sticky session: fails instead of moving when its exit fails */
  strict?: boolean;
  /** minutes */
  sessTime?: number;
  region?: string;
  product?: string;
  instance?: string;
}

export interface ParsedUsername {
  ok: true;
  user: string;
  options: UsernameOptions;
}

export type UsernameErrorCode = 'EMPTY_USER' | 'UNKNOWN_OPTION' | 'BAD_VALUE' | 'DUPLICATE_OPTION' | 'MISSING_VALUE';

export interface UsernameRefusal {
  ok: false;
  code: UsernameErrorCode;
  /** One line, safe to show the client (never contains a password). */
  reason: string;
}

const VALUE = /^[A-Za-z0-9_.]+$/;
/** Longest sticky-session id: ids are kept in the session table, so a client may not grow it at will. */
export const SESSION_ID_MAX = 64;
/** Seed 4.9 / part 7 (10093): a session lasts 1 to 120 minutes. */
export const SESSTIME_MIN = 1;
export const SESSTIME_MAX = 120;

function isOption(key: string | undefined): key is UsernameOption {
  return key !== undefined && (USERNAME_OPTIONS as readonly string[]).includes(key);
}

/** Options whose value is a platform identifier, which may hold '-'. */
const SPANNING: ReadonlySet<string> = new Set(['product', 'instance']);

/**
 * The index of a `product` or `instance` token whose value is every token from it to `end` (two or more, each a
 * plain value and none an option's name), the nearest to `end`; undefined when there is none.
 */
function spannedOption(tokens: readonly string[], end: number, seen: ReadonlySet<UsernameOption>): number | undefined {
  for (let at = end - 1; at >= 1; at--) {
    const t = tokens[at]!;
    if (isOption(t)) return SPANNING.has(t) && !seen.has(t) && at <= end - 3 ? at : undefined;
    if (!VALUE.test(t)) return undefined;
  }
  return undefined;
}

function refuse(code: UsernameErrorCode, reason: string): UsernameRefusal {
  return { ok: false, code, reason };
}

function shown(text: string): string {
  // Keep the reason one short line whatever the client sent.
  const clean = text.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > 40 ? `${clean.slice(0, 40)}...` : clean;
}

/**
 * Parses a proxy user name. `users` (optional: the gateway's users, src/admission/users.ts's table) says
 * whether a name is a configured user; without it a user name cannot contain '-' (anything after the first '-'
 * must be options). Read, not a callback of the caller's: the parse calls nothing above it.
 */
export function parseUsername(raw: string, users?: { get(name: string): unknown }): ParsedUsername | UsernameRefusal {
  const tokens = raw.split('-');
  const options: UsernameOptions = {};
  const seen = new Set<UsernameOption>();
  let end = tokens.length;
  // Consume (option, value) pairs from the right while the key is a known option.
  while (end >= 3) {
    const right = tokens[end - 2];
    let key: UsernameOption;
    let value = tokens[end - 1]!;
    let width = 2;
    if (isOption(right)) key = right;
    else {
      // A platform identifier may hold '-' (productNo "DYN-105-FLOW"): `-product-` and `-instance-` take every
      // token up to the option on their right, when none of them is empty or an option's name.
      const at = spannedOption(tokens, end, seen);
      if (at === undefined) break;
      key = tokens[at] as UsernameOption;
      value = tokens.slice(at + 1, end).join('-');
      width = end - at;
    }
    if (seen.has(key)) return refuse('DUPLICATE_OPTION', `option '${key}' given twice`);
    if (width === 2 && !VALUE.test(value)) return refuse('BAD_VALUE', `bad value for option '${key}': must match [A-Za-z0-9_.]+`);
    seen.add(key);
    switch (key) {
      case 'session':
        if (value.length > SESSION_ID_MAX)
          return refuse('BAD_VALUE', `bad value for option 'session': at most ${SESSION_ID_MAX} characters`);
        options.sessionId = value;
        break;
      case 'sesstime': {
        if (!/^[0-9]{1,4}$/.test(value) || Number(value) < SESSTIME_MIN || Number(value) > SESSTIME_MAX) {
          return refuse('BAD_VALUE', `bad value for option 'sesstime': minutes ${SESSTIME_MIN}-${SESSTIME_MAX}`);
        }
        options.sessTime = Number(value);
        break;
      }
      case 'region':
        options.region = value;
        break;
      case 'product':
        options.product = value;
        break;
      case 'instance':
        options.instance = value;
        break;
      case 'strict':
        if (value !== '0' && value !== '1') return refuse('BAD_VALUE', "bad value for option 'strict': 1 (strict) or 0 (soft)");
        if (value === '1') options.strict = true;
        break;
    }
    end -= width;
  }
  const user = tokens.slice(0, end).join('-');
  if (user === '' || tokens[0] === '') return refuse('EMPTY_USER', 'empty user name');
  if (options.strict && options.sessionId === undefined)
    return refuse('BAD_VALUE', "option 'strict' needs a sticky session (-session-<id>)");
  if (end === 1 || (users !== undefined && users.get(user) !== undefined)) return { ok: true, user, options };

  // The remainder holds a '-' and is not itself a user: find where the user ends and what follows it.
  let at = 1;
  if (users) {
    at = 0;
    for (let j = 1; j < end; j++) {
      if (users.get(tokens.slice(0, j).join('-')) !== undefined) {
        at = j;
        break;
      }
    }
    // No prefix is a user either: the name is simply unknown; the caller refuses it as such.
    if (at === 0) return { ok: true, user, options };
  }
  const key = tokens[at]!;
  if (isOption(key)) {
    const value = tokens[at + 1];
    if (value === undefined) return refuse('MISSING_VALUE', `option '${key}' needs a value`);
    return refuse('BAD_VALUE', `bad value for option '${key}': must match [A-Za-z0-9_.]+`);
  }
  if (key === '') return refuse('BAD_VALUE', 'empty option name');
  return refuse('UNKNOWN_OPTION', `unknown option '${shown(key)}'`);
}
