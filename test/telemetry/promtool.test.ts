// Issue 16: the scrape passes `promtool check metrics` (Debian's prometheus package) once traffic has gone
// through both listeners (so the labelled series exist), refusals included. Skipped, saying why, only when
// promtool is not installed (.ci/run installs it).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { startGateway, viaConnect, viaHttp, viaSocks5h, type Gateway } from '../e2e/harness.ts';
import { curl, startTarget, type BytesTarget } from '../e2e/limits-harness.ts';

const PROMTOOL = process.env.ROTOR_PROMTOOL ?? 'promtool';
const missing = spawnSync(PROMTOOL, ['--version'], { stdio: 'ignore' }).error !== undefined;

function promtoolCheck(text: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(PROMTOOL, ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('close', (code) => resolve({ code, out }));
    child.stdin.end(text);
  });
}

let gw: Gateway | undefined;
let target: BytesTarget | undefined;

before(async () => {
  if (missing) return;
  target = await startTarget();
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
  await target?.close();
});

test(
  'promtool check metrics passes on a scrape taken after traffic',
  { skip: missing ? `${PROMTOOL} not found: install Debian's prometheus package (.ci/run does)` : false },
  async () => {
    const g = gw!;
    for (const args of [
      viaSocks5h(g.ports.socks5, 'alice', 'alice-pass'),
      viaConnect(g.ports.http, 'alice', 'alice-pass'),
      viaHttp(g.ports.http, 'alice', 'alice-pass'),
    ]) {
      const r = await curl([...args, target!.url(50_000)]);
      assert.equal(r.code, 0, r.stderr);
    }
    await curl([...viaSocks5h(g.ports.socks5, 'alice', 'wrong'), target!.url(10)]);
    // The byte counters are updated on the relays' timer and at the end: wait for the last one.
    await g.daemon.connections.recorder.flush();
    const text = await g.metricsText();
    assert.match(text, /rotor_proxy_connections_total\{listener="socks5",result="ok"\} [1-9]/);
    assert.match(text, /rotor_proxy_connections_total\{listener="socks5",result="auth_failed"\} [1-9]/);
    assert.match(text, /# TYPE rotor_flow_balance_bytes gauge/);
    assert.doesNotMatch(text, /rotor_flow_balance_megabytes/);
    const check = await promtoolCheck(text);
    assert.equal(check.code, 0, `promtool check metrics:\n${check.out}`);
  },
);
