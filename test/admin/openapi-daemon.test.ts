// The OpenAPI document of a whole daemon, not only of the admin server: routes other components add to the
// admin server (the access generator, src/portal/wire.ts) must reach GET /docs/json as well. Red before
// (review17 #9): GET /v1/users/{name}/endpoints answered but was missing from the document, because it was
// added on the root instance before @fastify/swagger had loaded (its onRoute hook never saw it).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, type Gateway } from '../e2e/harness.ts';

let gw: Gateway;
before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw.close();
});

describe("a daemon's OpenAPI document", () => {
  test('lists the access generator route (userEndpoints) beside the admin routes', async () => {
    const { status, body } = await gw.admin<{ paths: Record<string, Record<string, { operationId?: string }>> }>('/docs/json');
    assert.equal(status, 200);
    assert.equal(body.paths['/v1/users/{name}/endpoints']?.get?.operationId, 'userEndpoints', Object.keys(body.paths).join(' '));
    assert.equal(body.paths['/v1/users/{name}']?.get?.operationId !== undefined, true, 'the admin routes are there too');
    // The route itself answers, as the document says.
    const listed = await gw.admin<{ endpoints: unknown[] }>('/v1/users/alice/endpoints?protocol=socks5&sessions=1&format=json');
    assert.equal(listed.status, 200);
    assert.equal(listed.body.endpoints.length > 0, true);
  });
});
