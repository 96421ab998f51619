// Pieces shared by the route files.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AdminDeps } from '../deps.ts';
import { errorResponses, security } from '../schemas.ts';
import { zs } from '../validation.ts';

export type RegisterRoutes = (app: FastifyInstance, deps: AdminDeps) => void;

/** Route schema decorations every /v1 route shares. */
export function doc(tag: string, summary: string, response: Record<string | number, unknown>): Record<string, unknown> {
  return { tags: [tag], summary, security, response: { ...response, ...errorResponses } };
}

/** For routes that take no query: an unknown parameter is a mistake worth saying so. */
export const noQuery = zs(z.strictObject({}));

/** Path or query text of the seed's identifiers. */
export const name = z.string().min(1).max(128);

/** `?codes=a,b` or `?codes=a&codes=b`. */
export const codesQuery = z.union([z.string(), z.array(z.string())]).transform((v) =>
  (Array.isArray(v) ? v : [v])
    .flatMap((s) => s.split(','))
    .map((s) => s.trim())
    .filter(Boolean),
);

/** Whole numbers given as `?x=1,2` or `?x=1&x=2`. */
export const intListQuery = z
  .union([z.string(), z.array(z.string())])
  .transform((v) =>
    (Array.isArray(v) ? v : [v])
      .flatMap((s) => s.split(','))
      .map((s) => s.trim())
      .filter(Boolean),
  )
  .pipe(
    z.array(
      z
        .string()
        .regex(/^-?\d+$/, 'expected whole numbers, comma-separated')
        .transform(Number),
    ),
  );

export const boolQuery = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

export const dynamicType = z.union([z.literal(104), z.literal(105)]);
/** 104 or 105 in a query string. */
export const dynamicTypeQuery = z.enum(['104', '105']).transform((v) => Number(v) as 104 | 105);
