// The descriptor guard on real sockets: a watched listener drops new clients during an episode (Node's
// maxConnections = -1, checked here against the running Node) and accepts again once the probe finds enough
// free; one warning per episode whatever the number of failures. And a real upstream dial in a process whose
// soft descriptor limit (lowered with prlimit on this very process) leaves no descriptor: the dial fails with
// DescriptorsExhaustedError (503, SOCKS5 0x01), reported once, never an UpstreamDialError a pool would act on.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import { DescriptorsExhaustedError, onDescriptorExhaustion, reportDescriptorExhaustion } from '../../src/errors/failed-accept.ts';
import { DescriptorGuard, descriptorGuard, procDescriptors, type DescriptorCount } from '../../src/proxy/accept-guard.ts';
import { connectTcp } from '../../src/proxy/dial-tcp.ts';
import { GatewayError, UpstreamDialError } from '../../src/proxy/errors.ts';
import { Router, type Dialer } from '../../src/proxy/router.ts';
import { dialThrough } from '../../src/proxy/upstream-dial.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { Prober, type ProbeablePool } from '../../src/health/prober.ts';
import type { ProbeResult } from '../../src/health/probe.ts';
import { captureLogger } from '../support/logger.ts';
import { sumSamples } from '../support/prometheus.ts';
import { poll } from '../support/wait.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { FixedPool, FixedPools, MapSessions, Users, node, user } from './fixtures.ts';

async function listening(onConnection: (s: Socket) => void = (s) => s.destroy()): Promise<{ server: Server; port: number }> {
  const server = createServer(onConnection);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port };
}

/** Connects and reports whether the server's handler saw the connection ('served') or it was closed unseen. */
function knock(port: number, served: Set<number>): Promise<'served' | 'dropped'> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let local = -1;
    s.on('error', () => {});
    s.on('connect', () => {
      local = s.localPort!;
      s.write(String(local));
    });
    s.on('close', () => resolve(served.has(local) ? 'served' : 'dropped'));
  });
}

describe('DescriptorGuard', () => {
  test('pauses a watched listener for the episode, says so once, resumes when the probe finds enough free', async () => {
    const served = new Set<number>();
    const { server, port } = await listening((s) => {
      s.once('data', (d) => {
        served.add(Number(d.toString()));
        s.destroy();
      });
    });
    let count: DescriptorCount = { open: 100, limit: 110, free: 0 };
    let probes = 0;
    const probe = async (): Promise<DescriptorCount> => {
      probes++;
      return count;
    };
    const guard = new DescriptorGuard({ probe, probeMs: 10, sampleMs: 10, reserve: 2, headroom: 4 });
    const metrics = createMetrics({ defaultMetrics: false });
    const { logger, text } = captureLogger('info');
    guard.watch(server);
    const detach = guard.attach({ metrics, logger });
    try {
      assert.equal(await knock(port, served), 'served', 'served before any exhaustion');
      guard.report('dial', Object.assign(new Error('connect EMFILE'), { code: 'EMFILE' }));
      guard.report('dial', Object.assign(new Error('connect EMFILE'), { code: 'EMFILE' }));
      assert.equal(guard.exhausted, true);
      assert.equal(await knock(port, served), 'dropped', 'dropped at accept during the episode');
      assert.equal(await knock(port, served), 'dropped');
      const during = await metrics.registry.metrics();
      assert.equal(sumSamples(during, 'rotor_descriptor_exhaustion_total', { where: 'dial' }), 2);
      assert.equal(sumSamples(during, 'rotor_descriptor_exhaustion_total', { where: 'accept' }), 2);
      assert.equal(sumSamples(during, 'rotor_descriptors_exhausted'), 1);
      assert.equal(text().match(/descriptors exhausted/g)?.length, 1, 'one warning for the episode');

      // 5 free is below reserve (2) + headroom (4): still paused; 6 ends it.
      count = { open: 105, limit: 110, free: 5 };
      const seen = probes;
      await poll(() => probes >= seen + 2, { what: 'two probes', timeoutMs: 5000 });
      assert.equal(guard.exhausted, true);
      assert.equal(await knock(port, served), 'dropped', 'not enough free yet');
      count = { open: 104, limit: 110, free: 6 };
      await poll(() => !guard.exhausted, { what: 'the episode to end', timeoutMs: 10_000 });
      assert.equal(await knock(port, served), 'served', 'accepting again');
      assert.match(text(), /accepting resumed/);
      const after = await metrics.registry.metrics();
      assert.equal(sumSamples(after, 'rotor_descriptors_exhausted'), 0);
      assert.equal(sumSamples(after, 'rotor_descriptors_limit'), 110);
    } finally {
      detach();
      server.close();
    }
  });

  test('a probe that cannot open a descriptor begins an episode (libuv refuses clients silently)', async () => {
    const emfile = Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });
    let full = true;
    const guard = new DescriptorGuard({
      probe: async () => {
        if (full) throw emfile;
        return { open: 10, limit: 1000, free: 990 };
      },
      probeMs: 10,
      sampleMs: 10,
    });
    const metrics = createMetrics({ defaultMetrics: false });
    const { logger, text } = captureLogger('info');
    const detach = guard.attach({ metrics, logger });
    try {
      await poll(() => guard.exhausted, { what: 'the sampler to notice', timeoutMs: 5000 });
      assert.equal(sumSamples(await metrics.registry.metrics(), 'rotor_descriptor_exhaustion_total', { where: 'accept' }), 1);
      full = false;
      await poll(() => !guard.exhausted, { what: 'the episode to end', timeoutMs: 5000 });
      assert.equal(text().match(/descriptors exhausted/g)?.length, 1);
    } finally {
      detach();
    }
  });

  test('procDescriptors reads this process: the limit of /proc/self/limits, what is open, what is left', async () => {
    const c = await procDescriptors(Infinity);
    const soft = Number(/^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))![1]);
    assert.equal(c.limit, soft);
    const listed = readdirSync('/proc/self/fd').length - 1;
    assert.ok(Math.abs(c.open - listed) <= 4, `open ${c.open} vs listed ${listed}`);
    assert.ok(c.free > 0 && c.free <= soft - c.open + 4, `free ${c.free}`);
  });
});

/** Sets this process's soft descriptor limit (the hard one kept), with prlimit(1). */
function setSoftNofile(soft: number): void {
  const hard = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'))!
    .trim()
    .split(/\s+/)[4]!;
  execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${soft}:${hard}`]);
}

/** The number the kernel hands out next (the lowest free). */
function lowestFree(): number {
  const fd = openSync('/dev/null', 'r');
  closeSync(fd);
  return fd;
}

describe('an upstream dial with no descriptor left', () => {
  test('fails with DescriptorsExhaustedError (503, SOCKS5 0x01), reported as where=dial, not an upstream failure', async () => {
    const { server, port } = await listening();
    const soft = Number(/^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))![1]);
    const reports: string[] = [];
    const off = onDescriptorExhaustion((where) => reports.push(where));
    const node = { id: 'n1', host: '127.0.0.1', port, protocol: 'http' as const };
    const failures: unknown[] = [];
    // Descriptors held for prlimit(1) to restore the limit with (spawning takes a few).
    const spare = Array.from({ length: 16 }, () => openSync('/dev/null', 'r'));
    try {
      // Nothing else may open a descriptor until the limit is back: the dials fail at socket().
      setSoftNofile(lowestFree());
      failures.push(
        await connectTcp('127.0.0.1', port, 5000).then(
          (s) => s.destroy(),
          (err: unknown) => err,
        ),
      );
      failures.push(
        await dialThrough(node as never, { connectTimeoutMs: 5000, handshakeTimeoutMs: 5000 }, 'http', null).then(
          (t) => t.socket.destroy(),
          (err: unknown) => err,
        ),
      );
    } finally {
      for (const fd of spare) closeSync(fd);
      setSoftNofile(soft);
      off();
      server.close();
    }
    for (const err of failures) {
      assert.ok(err instanceof DescriptorsExhaustedError, `a local failure: ${String(err)}`);
      assert.ok(!(err instanceof UpstreamDialError));
      assert.equal(err.httpStatus, 503);
      assert.equal(err.socksReply, 0x01);
      assert.equal(err.code, 'DESCRIPTORS_EXHAUSTED');
    }
    assert.deepEqual(reports, ['dial', 'dial']);
  });
});

describe('node failures while descriptors are exhausted', () => {
  // A dialer whose every node resets at once: what the embedded sandbox's proxies look like when they, in the
  // same process, cannot accept Rotor's dial.
  const resetting: Dialer = () => Promise.reject(new UpstreamDialError('reset', 'upstream reset'));
  const routerOn = (pool: FixedPool): Router =>
    new Router({
      users: new Users([user('alice', 'secret')]),
      meters: new UnlimitedMeters(),
      pools: new FixedPools(pool),
      sessions: new MapSessions(),
      connectTimeoutMs: 2000,
      handshakeTimeoutMs: 2000,
      dialers: { socks5: resetting, http: resetting },
    });
  const dialOnce = async (pool: FixedPool): Promise<unknown> => {
    const r = routerOn(pool);
    const a = r.authorize('alice', 'secret');
    assert.ok(a.ok);
    return r.dial(a.route, { host: '127.0.0.1', port: 9 }).then(
      () => undefined,
      (err: unknown) => err,
    );
  };

  test('are not held against the nodes during an episode (and are outside one)', async () => {
    const outside = new FixedPool([node('http', 1), node('http', 2)]);
    assert.ok((await dialOnce(outside)) instanceof GatewayError);
    assert.ok(outside.failures.length >= 1, 'outside an episode the node is blamed');

    const detach = descriptorGuard.attach({});
    try {
      reportDescriptorExhaustion('dial');
      assert.equal(descriptorGuard.exhausted, true);
      const during = new FixedPool([node('http', 1), node('http', 2)]);
      assert.ok((await dialOnce(during)) instanceof GatewayError);
      assert.deepEqual(during.failures, [], 'no node blamed while descriptors are exhausted');
    } finally {
      detach();
    }
  });
});

describe('health probes while descriptors are exhausted', () => {
  const probed = node('http', 1);
  const poolRecording = () => {
    const seen = { records: 0, abandoned: 0, started: 0 };
    const pool: ProbeablePool = {
      id: 'p1',
      probeDue: () => [probed],
      idleCandidate: () => undefined,
      probeStarted: () => void seen.started++,
      recordProbe: () => void seen.records++,
      probeAbandoned: () => void seen.abandoned++,
    };
    return { pool, seen };
  };
  const failed: ProbeResult = { ok: false, latencyMs: 1, reason: 'other', message: 'EMFILE' };

  test('none starts during an episode; one failing as it begins is abandoned, not recorded against the node', async () => {
    const outside = poolRecording();
    new Prober({ pools: () => [outside.pool], probe: async () => failed, idleIntervalMs: 0 }).tick();
    await poll(() => outside.seen.records === 1, { what: 'the failure recorded outside an episode' });

    const detach = descriptorGuard.attach({});
    try {
      const racing = poolRecording();
      const prober = new Prober({
        pools: () => [racing.pool],
        // The probe's own dial finds no descriptor: it reports (the episode begins) and fails.
        probe: async () => {
          reportDescriptorExhaustion('dial');
          return failed;
        },
        idleIntervalMs: 0,
      });
      prober.tick();
      await poll(() => racing.seen.abandoned === 1, { what: 'the probe abandoned' });
      assert.equal(racing.seen.records, 0, 'nothing recorded against the node');
      prober.tick();
      assert.equal(racing.seen.started, 1, 'no probe starts during the episode');
    } finally {
      detach();
    }
  });
});
