// Response serializers compiled on first use (src/admin/lazy-serializers.ts): the answer is what fastify's
// own compiler makes of the schema (undeclared fields dropped, types coerced), a route's serializer is not
// built at ready(), and once built it is kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Fastify from 'fastify';
import { buildLazySerializer, lazySerializers } from '../../src/admin/lazy-serializers.ts';

function server() {
  return Fastify({ logger: false, schemaController: { compilersFactory: { buildSerializer: buildLazySerializer } } });
}

test('a response is serialized by its schema, as the default compiler does', async () => {
  const app = server();
  const schema = { response: { 200: { type: 'object', properties: { name: { type: 'string' }, count: { type: 'integer' } } } } };
  app.get('/x', { schema }, async () => ({ name: 'alice', count: '7', secret: 'not declared' }));
  const lazy = await app.inject({ url: '/x' });
  const eager = Fastify({ logger: false });
  eager.get('/x', { schema }, async () => ({ name: 'alice', count: '7', secret: 'not declared' }));
  const expected = await eager.inject({ url: '/x' });
  assert.equal(lazy.statusCode, 200);
  assert.equal(lazy.body, '{"name":"alice","count":7}');
  assert.equal(lazy.body, expected.body);
  // Kept once built: the second answer goes through the same function.
  assert.equal((await app.inject({ url: '/x' })).body, lazy.body);
  await Promise.all([app.close(), eager.close()]);
});

test('no serializer is compiled at ready(): a schema the compiler refuses fails on first use, not at start', async () => {
  const broken = { response: { 200: { $ref: '#/definitions/missing' } } };
  const eager = Fastify({ logger: false });
  eager.get('/x', { schema: broken }, async () => ({}));
  await assert.rejects(async () => eager.ready(), /missing/i, 'the default compiler builds every serializer at ready()');
  const app = server();
  app.get('/x', { schema: broken }, async () => ({}));
  app.get('/ok', async () => ({ ok: true }));
  await app.ready();
  assert.equal((await app.inject({ url: '/ok' })).statusCode, 200);
  assert.equal((await app.inject({ url: '/x' })).statusCode, 500);
  await app.close();
});

test('a route named to be warmed has its 2xx serializer compiled right after ready(), before any request', async () => {
  const compiled: string[] = [];
  let done: () => void = () => undefined;
  const warmed = new Promise<void>((resolve) => (done = resolve));
  const build = lazySerializers({
    warm: ['GET /users'],
    onCompiled: (route) => {
      compiled.push(route);
      if (route === 'GET /users 200') done();
    },
  });
  const app = Fastify({ logger: false, schemaController: { compilersFactory: { buildSerializer: build } } });
  const schema = { response: { 200: { type: 'object', properties: { n: { type: 'integer' } } }, 404: { type: 'object' } } };
  app.get('/users', { schema }, async () => ({ n: 1 }));
  app.get('/other', { schema }, async () => ({ n: 2 }));
  await app.ready();
  await warmed;
  // Only the named route's success answer: the rest stay lazy.
  assert.deepEqual(compiled, ['GET /users 200']);
  assert.equal((await app.inject({ url: '/users' })).body, '{"n":1}');
  assert.deepEqual(compiled, ['GET /users 200'], 'the request used the warmed serializer');
  assert.equal((await app.inject({ url: '/other' })).body, '{"n":2}');
  assert.deepEqual(compiled, ['GET /users 200', 'GET /other 200']);
  await app.close();
});
