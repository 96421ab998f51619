// Response serializers compiled on a route's first answer instead of at ready(). Fastify builds one
// fast-json-stringify function per route and status code when the server starts: with every admin route
// documenting its answers and errors that is dozens of generated functions (their source text, bytecode and
// schema copies), about 7 MiB of heap an idle daemon never uses (docs/benchmarks.md "Idle RSS"). The same
// compiler (fastify's own, @fastify/fast-json-stringify-compiler) with the same schemas and options makes
// them; only the moment moves, so what a client receives does not change. A schema the compiler refuses is
// then refused on the first answer rather than at start: the admin tests answer every route.
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

type BuildSerializer = NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildSerializer']
>;

export const buildLazySerializer: BuildSerializer = (externalSchemas, serializerOpts) => {
  const compile = SerializerSelector()(externalSchemas as never, serializerOpts as never);
  return (routeSchema) => {
    let serialize: ((data: unknown) => string) | undefined;
    return (data: unknown) => (serialize ??= compile(routeSchema as never) as (data: unknown) => string)(data);
  };
};
