// The OpenAPI document as people and generators get it: fetched over HTTP from a listening admin server
// (GET /docs/json), checked for what generators need (an operationId on every operation, unique; servers;
// the bearer scheme as the default with `security: []` on the public routes), then linted with Redocly's
// `recommended` ruleset (@redocly/cli, a devDependency run from node_modules): no errors allowed. Swagger UI
// is served at /docs from the package's own assets.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHarness, type Harness } from './harness.ts';

const REDOCLY = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js');
const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options']);

interface Operation {
  operationId?: string;
  security?: unknown[];
}
interface Document {
  servers?: { url: string }[];
  security?: unknown[];
  components: { securitySchemes: Record<string, { type: string; scheme?: string }> };
  paths: Record<string, Record<string, Operation>>;
}

let h: Harness;
let base: string;
let dir: string;
before(async () => {
  h = await startHarness();
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), 'rotor-openapi-'));
});
after(async () => {
  await h.close();
  rmSync(dir, { recursive: true, force: true });
});

const operations = (doc: Document) =>
  Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([m]) => METHODS.has(m))
      .map(([method, op]) => ({ path, method, op })),
  );

describe('the OpenAPI document', () => {
  test('every operation has a unique operationId; servers name this server; bearer by default, public routes say security: []', async () => {
    const doc = (await (await fetch(`${base}/docs/json`)).json()) as Document;
    const ops = operations(doc);
    assert.ok(ops.length > 60, `${ops.length} operations`);
    const missing = ops.filter((o) => !o.op.operationId).map((o) => `${o.method.toUpperCase()} ${o.path}`);
    assert.deepEqual(missing, [], 'operations without an operationId');
    const ids = ops.map((o) => o.op.operationId);
    assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
    assert.deepEqual(
      doc.servers?.map((s) => s.url),
      [base],
    );
    assert.deepEqual(doc.components.securitySchemes.bearer, { type: 'http', scheme: 'bearer', description: 'admin.token' });
    assert.deepEqual(doc.security, [{ bearer: [] }]);
    for (const path of ['/healthz', '/readyz', '/metrics', '/callback'])
      assert.deepEqual(doc.paths[path]?.get?.security, [], `${path} is public`);
    for (const { path, op } of ops) if (path.startsWith('/v1/')) assert.notDeepEqual(op.security, [], `${path} needs the token`);
  });

  test("Redocly's recommended ruleset finds no errors", async () => {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, await (await fetch(`${base}/docs/json`)).text());
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        [REDOCLY, 'lint', '--extends=recommended', '--format=json', file],
        // No telemetry or update check: the test reaches nothing but this machine.
        {
          env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_UPDATE_NOTIFIER: '1' },
          maxBuffer: 16 * 1024 * 1024,
          timeout: 60_000,
        },
        (err, stdout) => (stdout ? resolve(stdout) : reject(err ?? new Error('redocly printed nothing'))),
      ),
    );
    const report = JSON.parse(out.slice(out.indexOf('{'))) as {
      totals: { errors: number; warnings: number };
      problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[];
    };
    const errors = report.problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`);
    assert.deepEqual(errors, []);
    assert.equal(report.totals.errors, 0);
    // What is left are warnings this document keeps on purpose (probes have no 4xx answer).
    const warnings = report.problems.filter((p) => p.severity === 'warn').map((p) => p.ruleId);
    assert.ok(
      warnings.every((r) => r === 'operation-4xx-response'),
      `unexpected warnings: ${warnings.join(', ')}`,
    );
  });

  test('Swagger UI at /docs from local assets', async () => {
    const page = await fetch(`${base}/docs/`);
    assert.equal(page.status, 200);
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.ok(assets.some((a) => a.includes('swagger-ui-bundle.js')));
    for (const a of assets) {
      assert.doesNotMatch(a, /^(https?:)?\/\//, `${a} is local`);
      const r = await fetch(new URL(a, `${base}/docs/`));
      assert.equal(r.status, 200, a);
      assert.ok((await r.arrayBuffer()).byteLength > 0, a);
    }
    const init = await (await fetch(`${base}/docs/static/swagger-initializer.js`)).text();
    assert.match(init, /validatorUrl: null/, 'no online validator badge');
  });
});
