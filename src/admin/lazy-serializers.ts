// Response serializers compiled on a route's first answer instead of at ready(). Fastify builds one
// fast-json-stringify function per route and status code when the server starts: with every admin route
// documenting its answers and errors that is dozens of generated functions (their source text, bytecode and
// schema copies), about 7 MiB of heap an idle daemon never uses (docs/benchmarks.md "Idle RSS"). The same
// compiler (fastify's own, @fastify/fast-json-stringify-compiler) with the same schemas and options makes
// them; only the moment moves, so what a client receives does not change. A schema the compiler refuses is
// then refused on the first answer rather than at start: the admin tests answer every route.
//
// A route whose first answer must not pay for its first use (GET /v1/users at 100,000 users: 60-180 ms, its
// serializer's compile and the schema validators fast-json-stringify compiles on its first anyOf, against
// 3-10 ms warm) is answered once in-process (fastify's inject, no socket) right after the server listens:
// warmRoutes. A client that comes sooner pays for it itself, as for any other route.
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';

type BuildSerializer = NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildSerializer']
>;

/** What fastify hands the serializer compiler per route and status (fastify/lib/validation.js). */
interface RouteSchema {
  method?: string;
  url?: string;
  httpStatus?: string;
}

export interface LazySerializerOptions {
  /** Called with `METHOD url status` whenever a serializer is compiled (tests). */
  onCompiled?: (route: string) => void;
}

/** The admin API's requests answered once right after it listens (see the top of this file). */
export const WARMED_ROUTES: readonly string[] = ['GET /v1/users'];

export function lazySerializers(options: LazySerializerOptions = {}): BuildSerializer {
  return (externalSchemas, serializerOpts) => {
    const compile = SerializerSelector()(externalSchemas as never, serializerOpts as never);
    return (routeSchema) => {
      const { method, url, httpStatus } = routeSchema as RouteSchema;
      const route = `${method ?? ''} ${url ?? ''}`;
      let serialize: ((data: unknown) => string) | undefined;
      const build = (): ((data: unknown) => string) => {
        serialize = compile(routeSchema as never) as (data: unknown) => string;
        options.onCompiled?.(`${route} ${httpStatus ?? ''}`);
        return serialize;
      };
      return (data: unknown) => (serialize ?? build())(data);
    };
  };
}

export const buildLazySerializer: BuildSerializer = lazySerializers();

/**
 * Answers each of `routes` (`METHOD url`) once in-process, as a client would (`headers`: the admin token),
 * so the first client's answer finds it compiled. Failures are left to a client's request to meet and report.
 */
export async function warmRoutes(
  app: FastifyInstance,
  headers: Record<string, string>,
  routes: readonly string[] = WARMED_ROUTES,
): Promise<void> {
  for (const route of routes) {
    const [method, url] = route.split(' ');
    await app.inject({ method: method as 'GET', url: url!, headers }).catch(() => undefined);
  }
}
