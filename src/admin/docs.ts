// The admin API described for people and generators: the OpenAPI document built by @fastify/swagger from the
// route schemas, served with Swagger UI at /docs (its assets come with @fastify/swagger-ui: no CDN) and as
// JSON and YAML at /docs/json and /docs/yaml. Every /v1 route needs the bearer token (the document's default
// security); the probes say `security: []`. The platform-callback route lives on its own server and port, so
// it is described here with a path-level server of its own.
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

export interface ApiDocsOptions {
  /** config callback.path; the callback server's route, described beside the admin routes. */
  callbackPath?: string;
}

const callbackAnswer = {
  description: 'the answer the platform reads',
  content: {
    'application/json': {
      schema: {
        type: 'object',
        properties: { code: { type: 'string', description: '`success` once the event is durably recorded' }, msg: { type: 'string' } },
      },
    },
  },
};

/** The callback route's description (src/admin/callback-server.ts, seed part 6). */
function callbackPath(): Record<string, unknown> {
  const param = (name: string, description: string, required: boolean, values?: string[]) => ({
    name,
    in: 'query',
    required,
    description,
    schema: { type: 'string', ...(values ? { enum: values } : {}) },
  });
  return {
    servers: [
      {
        url: 'http://{host}:{port}',
        description: 'the callback server (callback.host, callback.port), not the admin port',
        variables: { host: { default: '127.0.0.1' }, port: { default: '9091' } },
      },
    ],
    get: {
      operationId: 'platformCallback',
      tags: ['callbacks'],
      summary: 'platform callback: an order, instance or product changed (a hint; Rotor then reads it from the platform)',
      security: [],
      parameters: [
        param('type', 'what changed', true, ['order', 'instance', 'product']),
        param('no', 'the order (platform or merchant number), instance or product number', true),
        param('op', 'the operation, for order callbacks', false),
      ],
      responses: {
        200: callbackAnswer,
        400: { ...callbackAnswer, description: 'malformed input: a code other than success' },
        500: { ...callbackAnswer, description: 'not recorded: the platform calls again' },
      },
    },
  };
}

const TAGS: [string, string][] = [
  ['app', 'merchant information'],
  ['dictionaries', 'areas, cities and projects of the platform (cached)'],
  ['products', 'the catalog'],
  ['orders', 'placing and tracking orders'],
  ['instances', 'static instances'],
  ['assign-ip', 'buying a specified IP'],
  ['accounts', 'dynamic main accounts: balance, flow log, return'],
  ['sub-accounts', 'platform sub accounts and their limits'],
  ['whitelist', 'IP whitelist of a main account'],
  ['users', 'local proxy users'],
  ['pools', 'upstream pools and nodes'],
  ['sessions', 'sticky sessions'],
  ['stats', "the dashboard's series"],
  ['platform', 'any platform operation by its interface name (escape hatch)'],
  ['probes', 'health, readiness and metrics (no token)'],
  ['callbacks', 'the platform calling Rotor'],
];

export function registerApiDocs(app: FastifyInstance, options: ApiDocsOptions = {}): void {
  void app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Rotor admin API',
        version: '1',
        description:
          'Admin API of the Rotor proxy gateway (docs/reference.md "Admin API"). Every /v1 route needs `Authorization: Bearer <admin.token>` when a token is set.',
        license: { name: 'MIT', url: 'https://opensource.org/licenses/MIT' },
      },
      servers: [{ url: '/', description: 'this admin server' }],
      security: [{ bearer: [] }],
      tags: TAGS.map(([name, description]) => ({ name, description })),
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'admin.token' } } },
    },
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) return documentObject.swaggerObject;
      const doc = documentObject.openapiObject;
      // A hand-written path item: JSON as the OpenAPI types spell it, checked by the lint test.
      doc.paths = { ...doc.paths, [options.callbackPath ?? '/callback']: callbackPath() as never };
      return doc;
    },
  });
  void app.register(swaggerUi, {
    routePrefix: '/docs',
    // The document names the server that served it, so "Try it out" and generators reach this daemon.
    transformSpecification: (spec, request) => ({
      ...spec,
      servers: [{ url: `${request.protocol}://${request.host}`, description: 'this admin server' }],
    }),
    uiConfig: { deepLinking: true, persistAuthorization: false },
  });
}
