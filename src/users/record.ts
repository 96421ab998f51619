// The user record of docs/reference.md ("Users as data"): its fields, their defaults, and the zod schemas the
// admin routes and the config seed validate with. The password is never part of the record: the store keeps
// its scrypt hash beside it (StoredUser.passwordHash) and the routes return it once, when Rotor made it up.
// `rules` and `listen` are stored and returned here; enforcing them is the destination-rules and
// per-user-port code's job.
import { z } from 'zod';
import { SESS_TIME_MAX, SESS_TIME_MIN } from '../platform/operations.ts';
import { QUOTA_PERIODS, type QuotaPeriod } from '../accounting/period.ts';
import { listenSchema, rulesSchema } from './schemas.ts';
import { requestRulesSchema, type RequestRuleConfig } from './request-rules-schema.ts';

/** User names of the proxy user-name grammar ('-' separates options); the sub account's appUsername is string(32). */
export const USER_NAME = /^[A-Za-z0-9_.]+$/;
/** A user name as stored: records made before the dot-segment rule below still load. */
const storedName = z.string().regex(USER_NAME).min(1).max(32);
/** A new user's name: also one safe URL path segment (`.` and `..` are normalised away in /v1/users/<name>). */
export const userName = z
  .string()
  .regex(USER_NAME, "use only letters, digits, '_' and '.' ('-' separates user-name options)")
  .min(1)
  .max(32)
  .refine((n) => n !== '.' && n !== '..', "'.' and '..' are not user names (a name must be one URL path segment)");

// One definition of `rules` and `listen` for the config and the API: the destination-rules and user-port
// code's own (src/users/schemas.ts).
export { listenSchema, rulesSchema };

export const quotaSchema = z.strictObject({
  /** Bytes per period, both directions; -1 = unlimited. */
  bytes: z.number().int().min(-1).max(Number.MAX_SAFE_INTEGER),
  period: z.enum(QUOTA_PERIODS as unknown as [QuotaPeriod, ...QuotaPeriod[]]).default('total'),
});

const rfc3339 = z
  .string()
  .max(64)
  .regex(
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i,
    'must be an RFC 3339 date-time (e.g. 2026-12-31T23:59:59Z)',
  )
  .refine((v) => Number.isFinite(Date.parse(v)), 'must be a valid date-time');

/** A user's static instances: instanceNos as `-instance-` takes them (at most INSTANCES_MAX, no repeats). */
export const INSTANCES_MAX = 1000;
const instancesSchema = z
  .array(
    z
      .string()
      .regex(/^[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)*$/, 'an instanceNo is pieces of [A-Za-z0-9_.]+ joined by -')
      .max(64),
  )
  .max(INSTANCES_MAX)
  .refine((list) => new Set(list).size === list.length, 'must not repeat an instanceNo');

/**
 * A user's products: productNos it may name with `-product-` besides its default `product` (at most
 * PRODUCTS_MAX, no repeats). A productNo is written as `-product-` takes it: pieces of [A-Za-z0-9_.] joined by
 * '-' (the sandbox's DYN-105-FLOW).
 */
export const PRODUCTS_MAX = 100;
export const productsSchema = z
  .array(
    z
      .string()
      .regex(/^[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)*$/, 'a productNo is pieces of [A-Za-z0-9_.]+ joined by -')
      .max(64),
  )
  .max(PRODUCTS_MAX)
  .refine((list) => new Set(list).size === list.length, 'must not repeat a productNo');

/** Every field of a record a client may set (besides name and password), with defaults. */
const fields = {
  mainAccount: z.string().min(1).max(64).regex(/^\S+$/, 'must not contain spaces'),
  /** productNo drawn from; empty: the first dynamic product the merchant is authorized for. */
  product: z.string().max(64).default(''),
  draw: z.enum(['pwd', 'api']).default('pwd'),
  sessTime: z.number().int().min(SESS_TIME_MIN).max(SESS_TIME_MAX).default(5),
  quota: quotaSchema.default({ bytes: -1, period: 'total' }),
  rateBytesPerSec: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
  maxConnections: z.number().int().min(0).max(1_000_000).default(0),
  expiresAt: rfc3339.nullable().default(null),
  enabled: z.boolean().default(true),
  pricePerGb: z.number().min(0).max(1e9).nullable().default(null),
  listen: listenSchema.nullable().default(null),
  rules: rulesSchema.default({ denyPorts: [], denyHosts: [], allowPorts: [], allowHosts: [] }),
  /** Request rules (src/proxy/request-rules.ts): retry, ban or tag on a response's status or a slow exit. */
  requestRules: requestRulesSchema.default([]),
  /** Always export this user's per-user metric series (within the bound, see src/users/series.ts). */
  metrics: z.boolean().default(false),
  /** Static instances the user may name with `-instance-` (a static IP sold to this customer); null = every one. */
  instances: instancesSchema.nullable().default(null),
  /**
   * Products the user may name with `-product-` besides its default `product` (always allowed); null = every
   * product of the merchant, [] = the default product only.
   */
  products: productsSchema.nullable().default(null),
};

/** POST /v1/users. */
export const createUserSchema = z.strictObject({
  name: userName,
  password: z.string().min(1).max(255).optional(),
  ...fields,
});

/** PATCH /v1/users/:name: any subset, no defaults (an absent field is left as it is). */
export const patchUserSchema = z
  .strictObject({
    mainAccount: fields.mainAccount,
    product: z.string().max(64),
    draw: z.enum(['pwd', 'api']),
    sessTime: z.number().int().min(SESS_TIME_MIN).max(SESS_TIME_MAX),
    quota: quotaSchema,
    rateBytesPerSec: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    maxConnections: z.number().int().min(0).max(1_000_000),
    expiresAt: rfc3339.nullable(),
    enabled: z.boolean(),
    pricePerGb: z.number().min(0).max(1e9).nullable(),
    listen: listenSchema.nullable(),
    rules: rulesSchema,
    requestRules: requestRulesSchema,
    metrics: z.boolean(),
    instances: instancesSchema.nullable(),
    products: productsSchema.nullable(),
  })
  .partial();

export const passwordBodySchema = z.strictObject({ password: z.string().min(1).max(255).optional() });

export type CreateUserInput = z.output<typeof createUserSchema>;
export type UserPatch = z.output<typeof patchUserSchema>;
export type UserRules = z.output<typeof rulesSchema>;
export type UserListen = z.output<typeof listenSchema>;

/** Where a user came from: the config's `users:` (config fields win at every start and reload) or the API. */
export type UserSource = 'config' | 'api';

/** The stored part of a record (StoredUser.data). */
export interface UserData {
  name: string;
  mainAccount: string;
  product: string;
  draw: 'pwd' | 'api';
  sessTime: number;
  quota: { bytes: number; period: QuotaPeriod };
  rateBytesPerSec: number;
  maxConnections: number;
  expiresAt: string | null;
  enabled: boolean;
  pricePerGb: number | null;
  listen: UserListen | null;
  rules: UserRules;
  requestRules: RequestRuleConfig[];
  metrics: boolean;
  /** Static instances the user may name with `-instance-`; null = every running instance of the merchant. */
  instances: string[] | null;
  /** Products the user may name with `-product-` besides `product`; null = every product, [] = `product` only. */
  products: string[] | null;
  source: UserSource;
  createdAt: number;
  /**
   * Absent (or 0): the name's first customer, its usage kept under the plain name as for every record made
   * before. Else the creation time of a user made under a name that has history (deleted and made again): another
   * customer, whose usage is kept under `<name>~<incarnation>` (src/accounting/accounting.ts usageKey) and whose
   * portal shows only what came after it (records and usage rows from this time on).
   */
  incarnation?: number;
}

/** A record as the admin API answers it (docs/reference.md): the stored part plus live usage. */
export interface UserView extends Omit<UserData, 'createdAt' | 'incarnation'> {
  usedBytes: number;
  limitBytes: number;
  activeConnections: number;
  /** The current quota period's key (src/users/period.ts periodKey). */
  periodKey: string;
  /** 'creating' while the platform sub account is being made (the creation journal). */
  state: 'creating' | 'ready';
  createdAt: string;
  /** Only in the answer that made it up (create without a password, password generate). */
  password?: string;
}

/** The schema-checked stored data, tolerant of fields added later (defaults fill them). */
const storedSchema = z.looseObject({
  name: storedName,
  source: z.enum(['config', 'api']).default('api'),
  createdAt: z.number().default(0),
  incarnation: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  ...fields,
});

/**
 * A stored record back in memory. Most records at a reseller's size are plain (no rules, listen port,
 * expiry or price: what a batch import writes): those are checked field by field here and share one frozen
 * empty `rules` and `requestRules` and the repeated strings (account, product) — 100,000 users restart with a
 * fraction of the allocations and memory. Anything else goes through the schema, defaults and all.
 */
export function readStoredData(name: string, data: unknown): UserData | undefined {
  return plainData(name, data) ?? schemaData(name, data);
}

const EMPTY_RULES: UserRules = Object.freeze({
  denyPorts: Object.freeze([]) as unknown as number[],
  denyHosts: Object.freeze([]) as unknown as string[],
  allowPorts: Object.freeze([]) as unknown as number[],
  allowHosts: Object.freeze([]) as unknown as string[],
}) as UserRules;
const EMPTY_REQUEST_RULES = Object.freeze([]) as unknown as RequestRuleConfig[];
const RULE_KEYS = ['denyPorts', 'denyHosts', 'allowPorts', 'allowHosts'] as const;

/** One string object per repeated value (bounded: past the cap, values are kept as they come). */
const interned = new Map<string, string>();
function intern(s: string): string {
  const known = interned.get(s);
  if (known !== undefined) return known;
  if (interned.size < 4096) interned.set(s, s);
  return s;
}

const isInt = (v: unknown, min: number, max: number): v is number => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;

/** The plain record checked as the schema would (undefined: not plain, or not valid: the schema decides). */
function plainData(name: string, data: unknown): UserData | undefined {
  if (typeof data !== 'object' || data === null) return undefined;
  const d = data as Record<string, unknown>;
  const q = d.quota as Record<string, unknown> | null | undefined;
  const rules = d.rules as Record<string, unknown> | null | undefined;
  if (
    !(name.length >= 1 && name.length <= 32 && USER_NAME.test(name)) ||
    !(typeof d.mainAccount === 'string' && d.mainAccount.length >= 1 && d.mainAccount.length <= 64 && /^\S+$/.test(d.mainAccount)) ||
    !(typeof d.product === 'string' && d.product.length <= 64) ||
    (d.draw !== 'pwd' && d.draw !== 'api') ||
    !isInt(d.sessTime, SESS_TIME_MIN, SESS_TIME_MAX) ||
    typeof q !== 'object' ||
    q === null ||
    Object.keys(q).length !== 2 ||
    !isInt(q.bytes, -1, Number.MAX_SAFE_INTEGER) ||
    !(QUOTA_PERIODS as readonly unknown[]).includes(q.period) ||
    !isInt(d.rateBytesPerSec, 0, Number.MAX_SAFE_INTEGER) ||
    !isInt(d.maxConnections, 0, 1_000_000) ||
    d.expiresAt !== null ||
    typeof d.enabled !== 'boolean' ||
    d.pricePerGb !== null ||
    d.listen !== null ||
    typeof rules !== 'object' ||
    rules === null ||
    Object.keys(rules).length !== RULE_KEYS.length ||
    !RULE_KEYS.every((k) => Array.isArray(rules[k]) && (rules[k] as unknown[]).length === 0) ||
    !(Array.isArray(d.requestRules) && d.requestRules.length === 0) ||
    typeof d.metrics !== 'boolean' ||
    (d.instances !== undefined && d.instances !== null) ||
    (d.products !== undefined && d.products !== null) ||
    (d.source !== 'config' && d.source !== 'api') ||
    typeof d.createdAt !== 'number' ||
    (d.incarnation !== undefined && !isInt(d.incarnation, 0, Number.MAX_SAFE_INTEGER))
  )
    return undefined;
  return {
    name,
    mainAccount: intern(d.mainAccount),
    product: intern(d.product),
    draw: d.draw,
    sessTime: d.sessTime,
    quota: { bytes: q.bytes, period: q.period as QuotaPeriod },
    rateBytesPerSec: d.rateBytesPerSec,
    maxConnections: d.maxConnections,
    expiresAt: null,
    enabled: d.enabled,
    pricePerGb: null,
    listen: null,
    rules: EMPTY_RULES,
    requestRules: EMPTY_REQUEST_RULES,
    metrics: d.metrics,
    instances: null,
    products: null,
    source: d.source,
    createdAt: d.createdAt,
    ...(typeof d.incarnation === 'number' && d.incarnation > 0 ? { incarnation: d.incarnation } : {}),
  };
}

function schemaData(name: string, data: unknown): UserData | undefined {
  const r = storedSchema.safeParse({ ...(typeof data === 'object' && data !== null ? data : {}), name });
  if (!r.success) return undefined;
  const d = r.data;
  return {
    name: d.name,
    mainAccount: d.mainAccount,
    product: d.product,
    draw: d.draw,
    sessTime: d.sessTime,
    quota: d.quota,
    rateBytesPerSec: d.rateBytesPerSec,
    maxConnections: d.maxConnections,
    expiresAt: d.expiresAt,
    enabled: d.enabled,
    pricePerGb: d.pricePerGb,
    listen: d.listen,
    rules: d.rules,
    requestRules: d.requestRules,
    metrics: d.metrics,
    instances: d.instances,
    products: d.products,
    source: d.source,
    createdAt: d.createdAt,
    ...(d.incarnation !== undefined && d.incarnation > 0 ? { incarnation: d.incarnation } : {}),
  };
}

/** The key the user's usage is kept under (Accounting's usageKey): undefined for the plain name (see incarnation). */
export function usageKeyOf(d: Pick<UserData, 'name' | 'incarnation'>): string | undefined {
  return d.incarnation !== undefined && d.incarnation > 0 ? `${d.name}~${d.incarnation}` : undefined;
}

/** Epoch ms of expiresAt (null: never). */
export function expiryOf(d: Pick<UserData, 'expiresAt'>): number | null {
  return d.expiresAt === null ? null : Date.parse(d.expiresAt);
}
