// The one pino logger. Redaction is by key wherever the key appears (pino's paths need a depth, so the
// common depths are listed) plus a serializer for errors whose messages might carry credentials.
import { createRequire } from 'node:module';
import { pino, type Logger, type LoggerOptions } from 'pino';
import type { PrettyOptions, PrettyStream } from 'pino-pretty';

export type { Logger };

const SECRET_KEYS = [
  'appSecret',
  'password',
  'pwd',
  'newPassword',
  'generatedPassword',
  'token',
  'authorization',
  'Authorization',
  'proxy-authorization',
  'Proxy-Authorization',
  'proxyAuthorization',
  'secret',
  'pass',
];

/** Paths for pino's redact at the top level and up to three levels down. */
export const REDACT_PATHS = SECRET_KEYS.flatMap((k) => {
  const key = /^[A-Za-z_$][\w$]*$/.test(k) ? k : `["${k}"]`;
  const dot = key.startsWith('[') ? key : `.${key}`;
  return [key.startsWith('[') ? key : k, `*${dot}`, `*.*${dot}`, `*.*.*${dot}`];
});

/** A JSON member whose name is a secret key, up to the end of its string value. */
const SECRET_MEMBER = new RegExp(`("(?:${SECRET_KEYS.join('|')})"\\s*:\\s*")(?:[^"\\\\]|\\\\.)*"`, 'gi');

/**
 * Removes credentials from free text: in URLs and every proxy-string form of docs/reference.md
 * (scheme://user:pass@host, user:pass@host:port, host:port:user:pass → the password becomes ***), in
 * Bearer/Basic authorization values, and in JSON members named like a secret ("password":"…").
 */
export function redactText(text: string): string {
  return (
    text
      // The user may be empty (redis://:pass@host); the password runs to the authority's last '@' (it may hold one).
      .replace(/([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^\s"'/?#]*@/gi, '$1***@')
      .replace(/(^|[\s"'(,;[{=])([^\s"'(,;[{=:/@]+:)(?!\*\*\*@)[^\s"'/?#]+@/g, '$1$2***@')
      .replace(/(^|[\s"'(,;[{=])([A-Za-z0-9.-]+:\d{1,5}:[^\s"':@]+:)[^\s"',;]+/g, '$1$2***')
      .replace(SECRET_MEMBER, '$1***"')
      .replace(/(Bearer\s+)[A-Za-z0-9._~+/=-]+/g, '$1***')
      .replace(/(Basic\s+)[A-Za-z0-9+/=]+/g, '$1***')
  );
}

export interface LoggerSettings {
  level?: string;
  /** Pretty-print for humans; default: when stdout is a TTY. */
  pretty?: boolean;
  destination?: pino.DestinationStream;
}

export function createLogger(settings: LoggerSettings = {}): Logger {
  const level = settings.level ?? process.env.ROTOR_LOG_LEVEL ?? 'info';
  const options: LoggerOptions = {
    level,
    base: { service: 'rotor' },
    redact: { paths: REDACT_PATHS, censor: '***' },
    serializers: {
      err: (err: unknown) => {
        const s = pino.stdSerializers.err(err as Error);
        if (s && typeof s.message === 'string') s.message = redactText(s.message);
        if (s && typeof s.stack === 'string') s.stack = redactText(s.stack);
        return s;
      },
    },
    hooks: {
      // Messages are free text; scrub credentials out of them too.
      logMethod(args, method) {
        const a = args as unknown[];
        for (let i = 0; i < a.length; i++) if (typeof a[i] === 'string') a[i] = redactText(a[i] as string);
        method.apply(this, args);
      },
    },
  };
  if (settings.destination) return pino(options, settings.destination);
  const pretty = settings.pretty ?? (process.stdout.isTTY === true && level !== 'silent');
  // pino-pretty as a stream on this thread, loaded only when used: as a pino transport it ran in a worker
  // thread of its own, ~11 MiB more resident for a daemon started in a terminal (docs/benchmarks.md "Idle RSS").
  if (pretty) return pino(options, loadPretty()({ colorize: true, sync: true }));
  return pino(options);
}

function loadPretty(): (options: PrettyOptions) => PrettyStream {
  return createRequire(import.meta.url)('pino-pretty') as (options: PrettyOptions) => PrettyStream;
}
