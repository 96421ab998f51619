// A stop is not held by clients of the daemon's other listeners. A TCP connection to the admin or the callback port
// that has not sent its request head (a browser's preconnect, a stuck scraper, a stranger on the public callback
// port) kept `rotor start` running after SIGTERM until that client left (admin: for ever, callbacks: 30 s), and the
// proxy's drain waited behind it: a tunnel open at the stop outlived drainMs. Now the stop closes such connections
// at once, the tunnel is cut at drainMs and the process exits within docker's 10 s grace.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { cleanup, rawConfig, spawnDaemon, tempDir, writeConfigFile } from './limits-harness.ts';

after(() => cleanup());

const GRACE_MS = 10_000; // docker stop's default; the default drain (5 s) fits it

function opened(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

test('idle admin and callback clients hold neither the proxy drain nor the exit', async () => {
  const sink = createServer((c) => {
    c.on('error', () => undefined);
    c.resume();
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  const sinkPort = (sink.address() as { port: number }).port;
  const dir = tempDir('rotor-stop-');
  const file = join(dir, 'rotor.yaml');
  writeConfigFile(file, rawConfig(dir, [{ name: 'olga', password: 'olga-pw', mainAccount: 'shop1' }]));
  const d = await spawnDaemon(file, join(dir, 'rotor.log'));
  const idle: Socket[] = [];
  try {
    const tunnel = await opened(d.ports.http);
    idle.push(tunnel);
    tunnel.on('error', () => undefined);
    const auth = Buffer.from('olga:olga-pw').toString('base64');
    tunnel.write(`CONNECT 127.0.0.1:${sinkPort} HTTP/1.1\r\nHost: 127.0.0.1:${sinkPort}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
    const answer = await new Promise<string>((resolve) => tunnel.once('data', (b: Buffer) => resolve(b.toString('latin1'))));
    assert.match(answer, /^HTTP\/1\.1 200/);
    for (const port of [d.ports.admin, d.ports.callback]) {
      const s = await opened(port);
      s.on('error', () => undefined);
      idle.push(s);
    }
    const t0 = Date.now();
    const tunnelCut = new Promise<number>((r) => tunnel.once('close', () => r(Date.now() - t0)));
    d.signal('SIGTERM');
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      d.signal('SIGKILL');
    }, GRACE_MS + 5_000);
    const exit = await d.exited;
    clearTimeout(timer);
    const stoppedMs = Date.now() - t0;
    const cutMs = await tunnelCut;
    assert.equal(killed, false, `still running ${stoppedMs} ms after SIGTERM`);
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.ok(stoppedMs < GRACE_MS, `the stop took ${stoppedMs} ms`);
    assert.ok(cutMs < 8_000, `the tunnel was cut ${cutMs} ms after SIGTERM (proxy.drainMs 5 s)`);
  } finally {
    for (const s of idle) s.destroy();
    d.signal('SIGKILL');
    await d.exited;
    sink.close();
  }
});
