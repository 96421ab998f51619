// Issue 15's per-user limits on plain-HTTP forwarded requests (absolute-URI, curl -x http://… without -p),
// through the admin API and the real daemon on the embedded sandbox: rateBytesPerSec takes the response body
// and the request body from the user's bucket (backpressure, nothing dropped); a forwarded request holds a
// maxConnections slot like a tunnel and gives it back (100 sequential requests on a kept-alive connection and
// on new connections with a cap of 2); DELETE closes a live forwarded download.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCurl } from '../support/curl.ts';
import { startGateway, type Gateway } from './harness.ts';
import { cleanup, curl, startTarget, tempDir, waitFor, type BytesTarget } from './limits-harness.ts';

const TOKEN = 'users-http-rate-token-3c9e';
const MiB = 1024 * 1024;

interface View {
  name: string;
  activeConnections: number;
}

const viaHttp = (port: number, user: string, pass: string) => ['-x', `http://${user}:${pass}@127.0.0.1:${port}`];

/** One absolute-URI GET through the proxy on `agent` (kept alive); resolves the status and body length. */
function forwardedGet(agent: Agent, proxyPort: number, user: string, pass: string, url: string): Promise<{ status: number; size: number }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: proxyPort,
      path: url,
      agent,
      headers: { 'proxy-authorization': `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` },
    });
    req.once('error', reject);
    req.once('response', (res) => {
      let size = 0;
      res.on('data', (c: Buffer) => (size += c.length));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, size }));
      res.once('error', reject);
    });
    req.end();
  });
}

/**
 * curl through the proxy with curl's own clock: the seconds from the request being sent (pretransfer) and
 * from the first response byte (starttransfer) to the end, so process start-up on a loaded machine is not
 * counted as transfer time.
 */
async function timedCurl(
  args: string[],
): Promise<{ code: number; http: number; size: number; fromRequest: number; fromFirstByte: number; stderr: string }> {
  const r = await runCurl(
    ['-o', '/dev/null', ...args, '-w', '%{http_code} %{size_download} %{time_pretransfer} %{time_starttransfer} %{time_total}'],
    { maxTimeS: 20 },
  );
  const [http = 0, size = 0, pre = 0, first = 0, total = 0] = r.stdout.trim().split(' ').map(Number);
  return { code: r.exitCode, http, size, fromRequest: total - pre, fromFirstByte: total - first, stderr: r.stderr };
}

describe('per-user limits on plain-HTTP forwarded requests', () => {
  let gw: Gateway;
  let bytes: BytesTarget;

  before(async () => {
    gw = await startGateway({ config: { admin: { token: TOKEN }, proxy: { connectTimeoutMs: 3000 } } });
    bytes = await startTarget();
  });

  after(async () => {
    await bytes.close();
    await gw.close();
    cleanup();
  });

  test('rateBytesPerSec 1 MiB/s: a forwarded download arrives at 1 MiB/s ±15 %', async () => {
    const created = await gw.admin('/v1/users', {
      body: { name: 'slowget', password: 'slowget-pass', mainAccount: 'shop1', rateBytesPerSec: MiB },
    });
    assert.equal(created.status, 201);
    // The route warmed first (the user's first dial may fill a pool), so the timed run is the transfer.
    assert.equal((await curl([...viaHttp(gw.ports.http, 'slowget', 'slowget-pass'), bytes.url(10)])).http, 200);
    const size = 4 * MiB;
    const r = await timedCurl([...viaHttp(gw.ports.http, 'slowget', 'slowget-pass'), bytes.url(size)]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.http, 200);
    assert.equal(r.size, size, 'every byte arrives (backpressure, nothing dropped)');
    const rate = size / r.fromFirstByte / MiB;
    console.log(
      `# plain-HTTP forwarded download at 1 MiB/s: ${size / MiB} MiB in ${r.fromFirstByte.toFixed(2)} s from the first byte = ${rate.toFixed(3)} MiB/s`,
    );
    assert.ok(rate >= 0.85 && rate <= 1.15, `measured ${rate.toFixed(3)} MiB/s`);
  });

  test('rateBytesPerSec 1 MiB/s: a forwarded upload (POST body) takes from the same bucket', async () => {
    const created = await gw.admin('/v1/users', {
      body: { name: 'slowpost', password: 'slowpost-pass', mainAccount: 'shop1', rateBytesPerSec: MiB },
    });
    assert.equal(created.status, 201);
    // /echo answers with the body once it has all of it: 2 MiB up, then 2 MiB down, 4 MiB through the bucket.
    // Unthrottled, the upload would take no time and the whole exchange would run at about 2 MiB/s.
    const file = join(tempDir('rotor-http-rate-'), 'body.bin');
    writeFileSync(file, Buffer.alloc(2 * MiB, 0x62));
    const echo = bytes.url(0).replace(/\/bytes\/0$/, '/echo');
    assert.equal((await curl([...viaHttp(gw.ports.http, 'slowpost', 'slowpost-pass'), '--data-binary', 'warm', echo])).http, 200);
    const r = await timedCurl([
      ...viaHttp(gw.ports.http, 'slowpost', 'slowpost-pass'),
      '--data-binary',
      `@${file}`,
      '-H',
      'content-type: application/octet-stream',
      echo,
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.http, 200);
    assert.equal(r.size, 2 * MiB, 'the echoed body is whole');
    const rate = (4 * MiB) / r.fromRequest / MiB;
    console.log(
      `# plain-HTTP forwarded upload + echo at 1 MiB/s: 4 MiB in ${r.fromRequest.toFixed(2)} s from the request = ${rate.toFixed(3)} MiB/s`,
    );
    assert.ok(rate >= 0.85 && rate <= 1.15, `measured ${rate.toFixed(3)} MiB/s`);
  });

  test('maxConnections 2: 100 sequential forwarded requests all succeed and the slots come back', async () => {
    const created = await gw.admin('/v1/users', {
      body: { name: 'capped2', password: 'capped2-pass', mainAccount: 'shop1', maxConnections: 2 },
    });
    assert.equal(created.status, 201);
    // 80 on one kept-alive client connection (each request is admitted, the connection holds one slot) ...
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 80; i++) {
        const r = await forwardedGet(agent, gw.ports.http, 'capped2', 'capped2-pass', bytes.url(1000));
        assert.deepEqual(r, { status: 200, size: 1000 }, `request ${i + 1}`);
      }
    } finally {
      agent.destroy();
    }
    // ... and 20 on a new client connection each (curl).
    for (let i = 0; i < 20; i++) {
      const r = await curl([...viaHttp(gw.ports.http, 'capped2', 'capped2-pass'), bytes.url(1000)]);
      assert.equal(r.http, 200, `curl request ${i + 1}: ${r.http} ${r.stderr}`);
      assert.equal(r.size, 1000);
    }
    await waitFor(
      'the user to have no active connection',
      async () => {
        const row = (await gw.admin<View>('/v1/users/capped2')).body;
        return row.activeConnections === 0 ? true : undefined;
      },
      5000,
      20,
    );
    // Both slots are free: two kept-alive connections at once are admitted, a third is refused.
    const a = new Agent({ keepAlive: true, maxSockets: 1 });
    const b = new Agent({ keepAlive: true, maxSockets: 1 });
    const c = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      assert.equal((await forwardedGet(a, gw.ports.http, 'capped2', 'capped2-pass', bytes.url(10))).status, 200);
      assert.equal((await forwardedGet(b, gw.ports.http, 'capped2', 'capped2-pass', bytes.url(10))).status, 200);
      assert.equal((await forwardedGet(c, gw.ports.http, 'capped2', 'capped2-pass', bytes.url(10))).status, 403);
      // A further request on a connection already holding a slot is still admitted at the cap.
      assert.equal((await forwardedGet(a, gw.ports.http, 'capped2', 'capped2-pass', bytes.url(10))).status, 200);
    } finally {
      a.destroy();
      b.destroy();
      c.destroy();
    }
  });

  test('DELETE closes a live forwarded download within 1 s', async () => {
    await gw.admin('/v1/users', { body: { name: 'gonefwd', password: 'gonefwd-pass', mainAccount: 'shop1' } });
    let received = 0;
    let closedAt = 0;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const req = request({
      host: '127.0.0.1',
      port: gw.ports.http,
      path: bytes.url(200 * MiB, MiB),
      agent,
      headers: { 'proxy-authorization': `Basic ${Buffer.from('gonefwd:gonefwd-pass').toString('base64')}` },
    });
    req.on('error', () => {});
    req.once('response', (res) => {
      res.on('data', (c: Buffer) => (received += c.length));
      res.on('error', () => {});
      res.once('close', () => (closedAt = Date.now()));
    });
    req.end();
    try {
      await waitFor('the download to run', () => (received > 100_000 ? true : undefined), 10_000, 10);
      const t0 = Date.now();
      const r = await gw.admin('/v1/users/gonefwd', { method: 'DELETE' });
      assert.equal(r.status, 204);
      await waitFor('the download to be closed', () => (closedAt > 0 ? true : undefined), 3000, 10);
      assert.ok(closedAt - t0 < 1000, `closed after ${closedAt - t0} ms`);
      assert.ok(received < 20 * MiB, 'cut long before its end');
    } finally {
      agent.destroy();
    }
  });
});
