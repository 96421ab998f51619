// Reading the configuration: file (YAML) → environment overrides (which win) → schema with defaults.
// Every problem is reported as `key: problem`, naming the environment variable when the value came from one.
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { configSchema, type Config } from './schema.ts';
import { RotorError } from '../errors/rotor-error.ts';

/** Environment variables and the key each one sets; `number` ones are read as whole numbers. */
export const ENV_OVERRIDES = [
  { env: 'ROTOR_PLATFORM_MODE', key: 'platform.mode', type: 'string' },
  { env: 'ROTOR_BASE_URL', key: 'platform.baseUrl', type: 'string' },
  { env: 'ROTOR_APP_KEY', key: 'platform.appKey', type: 'string' },
  { env: 'ROTOR_APP_SECRET', key: 'platform.appSecret', type: 'string' },
  { env: 'ROTOR_HTTP_PORT', key: 'proxy.http.port', type: 'number' },
  { env: 'ROTOR_SOCKS_PORT', key: 'proxy.socks5.port', type: 'number' },
  { env: 'ROTOR_ADMIN_PORT', key: 'admin.port', type: 'number' },
  { env: 'ROTOR_ADMIN_TOKEN', key: 'admin.token', type: 'string' },
  { env: 'ROTOR_CALLBACK_PORT', key: 'callback.port', type: 'number' },
  { env: 'ROTOR_STORE', key: 'store.path', type: 'string' },
  { env: 'ROTOR_LOG_LEVEL', key: 'log.level', type: 'string' },
  { env: 'ROTOR_EVENTS_WEBHOOK_URL', key: 'events.webhookUrl', type: 'string' },
  { env: 'ROTOR_EVENTS_SECRET', key: 'events.secret', type: 'string' },
] as const;

export interface ConfigIssue {
  /** Dotted key path (`platform.appSecret`, `users.0.name`); empty for the file as a whole. */
  key: string;
  problem: string;
  /** The environment variable the value came from, when it did. */
  env?: string;
}

export class ConfigError extends RotorError {
  readonly issues: ConfigIssue[];
  readonly file: string | undefined;

  constructor(issues: ConfigIssue[], file?: string) {
    const lines = issues.map((i) => `  ${i.key || '(config)'}${i.env ? ` (from ${i.env})` : ''}: ${i.problem}`);
    super('CONFIG_INVALID', `invalid configuration${file ? ` in ${file}` : ''}:\n${lines.join('\n')}`);
    this.issues = issues;
    this.file = file;
  }
}

export interface LoadOptions {
  /** Config file; else $ROTOR_CONFIG; else config/default.yaml. */
  file?: string;
  /** Environment to read overrides from; default process.env. */
  env?: Record<string, string | undefined>;
}

const PACKAGE_DEFAULT = fileURLToPath(new URL('../../config/default.yaml', import.meta.url));

/** The file loadConfig would read: --config, then $ROTOR_CONFIG, then ./config/default.yaml, then the package's. */
export function resolveConfigFile(options: LoadOptions = {}): string {
  const env = options.env ?? process.env;
  const explicit = options.file ?? (env.ROTOR_CONFIG || undefined);
  if (explicit) return resolve(explicit);
  const local = resolve('config/default.yaml');
  return existsSync(local) ? local : PACKAGE_DEFAULT;
}

/** Reads and validates the configuration; synchronous, for start-up and the CLI (before anything is served). */
export function loadConfig(options: LoadOptions = {}): Config {
  const file = resolveConfigFile(options);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw unreadable(err, file);
  }
  return parseConfigText(text, file, options);
}

/** The same as loadConfig with the file read off the event loop: a running daemon's reload uses it. */
export async function reloadConfig(options: LoadOptions = {}): Promise<Config> {
  const file = resolveConfigFile(options);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw unreadable(err, file);
  }
  return parseConfigText(text, file, options);
}

function unreadable(err: unknown, file: string): ConfigError {
  const code = (err as NodeJS.ErrnoException).code;
  return new ConfigError(
    [{ key: '', problem: code === 'ENOENT' ? 'config file not found' : `cannot read the config file (${code ?? 'error'})` }],
    file,
  );
}

function parseConfigText(text: string, file: string, options: LoadOptions): Config {
  const doc = parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((e) => ({ key: '', problem: `YAML: ${e.message.split('\n')[0] ?? e.message}` })),
      file,
    );
  }
  return parseConfig(doc.toJS() ?? {}, { env: options.env, file });
}

/** Validates an already-read config object (file contents), applying the environment overrides. */
export function parseConfig(raw: unknown, options: { env?: Record<string, string | undefined>; file?: string } = {}): Config {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigError([{ key: '', problem: 'the config must be a YAML mapping' }], options.file);
  }
  const env = options.env ?? process.env;
  const merged = structuredClone(raw) as Record<string, unknown>;
  const fromEnv = new Map<string, string>();
  for (const o of ENV_OVERRIDES) {
    const value = env[o.env];
    if (value === undefined || value === '') continue;
    // A malformed number stays a string so the schema reports it against the key.
    const typed = o.type === 'number' && /^\d+$/.test(value.trim()) ? Number(value.trim()) : value;
    if (!setPath(merged, o.key.split('.'), typed)) {
      throw new ConfigError([{ key: o.key, env: o.env, problem: 'cannot be set: a parent key is not a mapping' }], options.file);
    }
    fromEnv.set(o.key, o.env);
  }
  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) throw new ConfigError(toIssues(parsed.error, fromEnv), options.file);
  return parsed.data;
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): boolean {
  let node = target;
  for (const part of path.slice(0, -1)) {
    const next = node[part];
    if (next === undefined || next === null) node[part] = {};
    else if (typeof next !== 'object' || Array.isArray(next)) return false;
    node = node[part] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
  return true;
}

function toIssues(error: z.ZodError, fromEnv: Map<string, string>): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const issue of error.issues) {
    const base = issue.path.map(String);
    if (issue.code === 'unrecognized_keys') {
      for (const k of issue.keys) out.push({ key: [...base, k].join('.'), problem: 'unknown key' });
      continue;
    }
    const key = base.join('.');
    const env = fromEnv.get(key);
    const problem =
      issue.code === 'invalid_type' && issue.message.endsWith('received undefined') ? `required (${issue.expected})` : issue.message;
    out.push(env ? { key, problem, env } : { key, problem });
  }
  return out;
}
