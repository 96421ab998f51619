// Request validation with zod. Every route declares its inputs as zod schemas through `zs()`, which hands
// fastify the JSON-schema form (for @fastify/swagger) and remembers the zod schema behind it; the server's
// validator compiler then validates with zod. So the admin API checks exactly what the operation table
// checks (refinements included), messages name the field, and the parsed (coerced, defaulted) value is what
// the route receives.
import { z } from 'zod';
import { AdminError } from './errors.ts';
import { fromZod } from './schemas.ts';
import { InternalError } from '../errors/rotor-error.ts';

const zodBehind = new WeakMap<object, z.ZodType>();

/** A route's request schema (body, querystring or params) from zod. */
export function zs(schema: z.ZodType): Record<string, unknown> {
  const json = fromZod(schema);
  zodBehind.set(json, schema);
  return json;
}

const PART_NAME: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'headers' };

export function describeZodError(part: string, error: z.ZodError): string {
  const where = PART_NAME[part] ?? part;
  return error.issues
    .slice(0, 5)
    .map((i) => {
      const path = i.path.map(String).join('.');
      // Unknown keys are reported by zod on the parent; name them like any other field.
      if (i.code === 'unrecognized_keys')
        return i.keys.map((k) => `${where}.${path ? path + '.' : ''}${k}: is not a known field`).join('; ');
      return `${where}${path ? '.' + path : ''}: ${i.message}`;
    })
    .join('; ');
}

type Validator = (data: unknown) => { value: unknown } | { error: Error };

/** fastify validatorCompiler: refuses (at startup) any request schema not built with zs(). */
export function zodValidatorCompiler({
  schema,
  httpPart,
  method,
  url,
}: {
  schema: unknown;
  httpPart?: string;
  method?: string;
  url?: string;
}): Validator {
  const zodSchema = typeof schema === 'object' && schema !== null ? zodBehind.get(schema) : undefined;
  if (!zodSchema) throw new InternalError(`admin route ${method ?? ''} ${url ?? ''}: the ${httpPart ?? ''} schema must be built with zs()`);
  const part = httpPart ?? 'request';
  return (data) => {
    const r = zodSchema.safeParse(data ?? undefined);
    if (r.success) return { value: r.data };
    return { error: new AdminError(400, 'INVALID_INPUT', describeZodError(part, r.error)) };
  };
}

/** A request schema validated by `schema` but documented by `docs` (for shapes JSON schema says poorly). */
export function zsWith(docs: Record<string, unknown>, schema: z.ZodType): Record<string, unknown> {
  const json = { ...docs };
  zodBehind.set(json, schema);
  return json;
}

/**
 * Parses with `schema` inside another zod schema, re-raising its issues (unknown keys named one by one)
 * so that messages still name the field.
 */
export function reraise<T>(schema: z.ZodType<T>, value: unknown, ctx: z.RefinementCtx): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  for (const i of r.error.issues) {
    if (i.code === 'unrecognized_keys')
      for (const k of i.keys) ctx.addIssue({ code: 'custom', message: 'is not a known field', path: [...i.path, k] });
    else ctx.addIssue({ code: 'custom', message: i.message, path: i.path });
  }
  return z.NEVER;
}
