// Response serializers compiled on a route's first answer instead of at ready(). Fastify builds one
// fast-json-stringify function per route and status code when the server starts: with every admin route
// documenting its answers and errors that is dozens of generated functions (their source text, bytecode and
// schema copies), about 7 MiB of heap an idle daemon never uses (docs/benchmarks.md "Idle RSS"). The same
// compiler (fastify's own, @fastify/fast-json-stringify-compiler) with the same schemas and options makes
// them; only the moment moves, so what a client receives does not change. A schema the compiler refuses is
// then refused on the first answer rather than at start: the admin tests answer every route.
//
// A route whose first answer must not pay for its compile (GET /v1/users: 30-60 ms for its schema, more than
// its whole answer at 100,000 users) is warmed: its success serializers are compiled on the turn after the
// routes are built (ready()), before the daemon answers anything, off any request. A request that comes
// sooner compiles it itself, as any other route does.
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

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
  /** Routes (`METHOD url`, as registered) whose 2xx serializers are compiled right after ready(). */
  warm?: readonly string[];
  /** Called with `METHOD url status` whenever a serializer is compiled (tests). */
  onCompiled?: (route: string) => void;
}

/** The admin API's routes warmed after ready (see the top of this file). */
export const WARMED_ROUTES: readonly string[] = ['GET /v1/users'];

export function lazySerializers(options: LazySerializerOptions = {}): BuildSerializer {
  const warm = new Set(options.warm ?? []);
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
      // A schema the compiler refuses is left for the first answer to report (500), as for any lazy route.
      if (warm.has(route) && httpStatus?.startsWith('2') === true)
        setImmediate(() => {
          if (serialize === undefined) {
            try {
              build();
            } catch {
              // reported by the first answer
            }
          }
        });
      return (data: unknown) => (serialize ?? build())(data);
    };
  };
}

export const buildLazySerializer: BuildSerializer = lazySerializers({ warm: WARMED_ROUTES });
