// Response serializers compiled on first use (src/admin/lazy-serializers.ts): the answer is what fastify's
// own compiler makes of the schema (undeclared fields dropped, types coerced), a route's serializer is not
// built at ready(), and once built it is kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Fastify from 'fastify';
import { buildLazySerializer, lazySerializers, warmRoutes } from '../../src/admin/lazy-serializers.ts';

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

test('warmRoutes answers the named route once in-process: its serializer is compiled before any client asks', async () => {
  const compiled: string[] = [];
  const build = lazySerializers({ onCompiled: (route) => compiled.push(route) });
  const app = Fastify({ logger: false, schemaController: { compilersFactory: { buildSerializer: build } } });
  const schema = { response: { 200: { type: 'object', properties: { n: { type: 'integer' } } }, 404: { type: 'object' } } };
  let answered = 0;
  app.addHook('onRequest', async (request, reply) => {
    if (request.headers.authorization !== 'Bearer t') await reply.code(401).send({});
  });
  app.get('/users', { schema }, async () => ({ n: ++answered }));
  app.get('/other', { schema }, async () => ({ n: 0 }));
  await app.ready();
  assert.deepEqual(compiled, [], 'nothing compiled at ready()');
  await warmRoutes(app, { authorization: 'Bearer t' }, ['GET /users']);
  // Only the named route's answer, through the route's own hooks (the token was taken).
  assert.deepEqual(compiled, ['GET /users 200']);
  assert.equal(answered, 1);
  assert.equal((await app.inject({ url: '/users', headers: { authorization: 'Bearer t' } })).body, '{"n":2}');
  assert.deepEqual(compiled, ['GET /users 200'], "the client's request used the warmed serializer");
  assert.equal((await app.inject({ url: '/other', headers: { authorization: 'Bearer t' } })).body, '{"n":0}');
  assert.deepEqual(compiled, ['GET /users 200', 'GET /other 200']);
  await app.close();
});
