import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SessionTable } from '../../src/session/table.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.ts';
import { socksNode } from '../support/nodes.ts';

const node = (port: number): UpstreamNode => socksNode(port);
const MIN = 60_000;

function setup(maxSessions?: number) {
  const c = { t: 5_000_000 };
  const metrics = createMetrics({ defaultMetrics: false });
  const table = new SessionTable({ now: () => c.t, metrics, ...(maxSessions ? { maxSessions } : {}) });
  return { c, metrics, table };
}
async function rotations(metrics: Metrics, reason: string) {
  return (await metrics.sessionRotations.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
}
async function active(metrics: Metrics) {
  return (await metrics.sessionsActive.get()).values[0]?.value;
}

describe('SessionTable', () => {
  test('sticky within sessTime counted from the start, not sliding', async () => {
    const { c, metrics, table } = setup();
    const a = node(1);
    const s = table.bind('alice', 's1', a, 5);
    assert.deepEqual(s, { user: 'alice', sessionId: 's1', node: a, startedAt: c.t, expiresAt: c.t + 5 * MIN, foreign: false });
    for (let i = 0; i < 4; i++) {
      c.t += MIN; // used every minute: still ends 5 minutes after it began
      assert.equal(table.get('alice', 's1')?.node, a);
    }
    c.t += MIN - 1;
    assert.equal(table.get('alice', 's1')?.node, a);
    assert.equal(await active(metrics), 1);
    c.t += 1;
    assert.equal(table.get('alice', 's1'), undefined, 'expired at startedAt + sessTime');
    assert.equal(await rotations(metrics, 'expired'), 1);
    assert.equal(await active(metrics), 0);
    assert.equal(table.get('alice', 's1'), undefined);
    assert.equal(await rotations(metrics, 'expired'), 1, 'counted once');
    table.bind('alice', 's2', node(2), 1);
    c.t += 10 * MIN; // long past the cache's own TTL too: still seen and counted on lookup
    assert.equal(table.get('alice', 's2'), undefined);
    assert.equal(await rotations(metrics, 'expired'), 2);
  });

  test('after expiry a new bind starts a new session with its own clock', () => {
    const { c, table } = setup();
    table.bind('alice', 's1', node(1), 1);
    c.t += MIN;
    assert.equal(table.get('alice', 's1'), undefined);
    const b = node(2);
    const s = table.bind('alice', 's1', b, 2);
    assert.equal(s?.startedAt, c.t);
    c.t += 2 * MIN - 1;
    assert.equal(table.get('alice', 's1')?.node, b);
  });

  test('sessions are per user and id', () => {
    const { table } = setup();
    table.bind('alice', 's1', node(1), 5);
    table.bind('alice', 's2', node(2), 5);
    table.bind('bob', 's1', node(3), 5);
    assert.equal(table.get('alice', 's1')?.node.port, 1);
    assert.equal(table.get('alice', 's2')?.node.port, 2);
    assert.equal(table.get('bob', 's1')?.node.port, 3);
    assert.equal(table.get('bob', 's2'), undefined);
    assert.equal(table.size, 3);
  });

  test('rotate manual and failed: counted by reason, next get misses', async () => {
    const { c, metrics, table } = setup();
    table.bind('alice', 's1', node(1), 5);
    table.bind('alice', 's2', node(2), 5);
    assert.equal(table.rotate('alice', 's1', 'manual'), true);
    assert.equal(table.rotate('alice', 's2', 'failed'), true);
    assert.equal(table.rotate('alice', 's3', 'manual'), false, 'unknown session');
    assert.equal(table.get('alice', 's1'), undefined);
    assert.equal(table.get('alice', 's2'), undefined);
    assert.equal(await rotations(metrics, 'manual'), 1);
    assert.equal(await rotations(metrics, 'failed'), 1);
    assert.equal(await rotations(metrics, 'expired'), 0);
    // Rotating a session that already ran out counts it as expired.
    table.bind('alice', 's4', node(4), 1);
    c.t += MIN;
    assert.equal(table.rotate('alice', 's4', 'manual'), false);
    assert.equal(await rotations(metrics, 'expired'), 1);
    assert.equal(await rotations(metrics, 'manual'), 1);
    assert.equal(await active(metrics), 0);
  });

  test('sessTime ≤ 0 holds nothing', () => {
    const { table } = setup();
    assert.equal(table.bind('alice', 's1', node(1), 0), undefined);
    assert.equal(table.bind('alice', 's1', node(1), -1), undefined);
    assert.equal(table.get('alice', 's1'), undefined);
    assert.equal(table.size, 0);
  });

  test('bounded size: least recently used go first', async () => {
    const { metrics, table } = setup(3);
    for (let i = 1; i <= 3; i++) table.bind('u', `s${i}`, node(i), 5);
    table.get('u', 's1'); // s1 now most recently used
    table.bind('u', 's4', node(4), 5);
    assert.equal(table.size, 3);
    assert.equal(table.get('u', 's2'), undefined, 's2 evicted');
    assert.ok(table.get('u', 's1'));
    assert.ok(table.get('u', 's4'));
    assert.equal(await active(metrics), 3);
  });

  test('list and sweep: views without passwords; stale entries dropped without a rotation', async () => {
    const { c, metrics, table } = setup();
    table.bind('alice', 's1', node(1), 1);
    table.bind('bob', 's9', node(2), 10);
    const views = table.list();
    assert.deepEqual(views.map((v) => [v.user, v.sessionId, v.nodeId, v.expiresAt - v.startedAt]).sort(), [
      ['alice', 's1', 'socks5://u@127.0.0.1:1', MIN],
      ['bob', 's9', 'socks5://u@127.0.0.1:2', 10 * MIN],
    ]);
    assert.ok(!JSON.stringify(views).includes('pw'));
    c.t += MIN;
    assert.deepEqual(
      table.list().map((v) => v.sessionId),
      ['s9'],
    );
    assert.equal(table.size, 1);
    assert.equal(await active(metrics), 1);
    assert.equal(await rotations(metrics, 'expired'), 0);
    table.clear();
    assert.equal(await active(metrics), 0);
  });
});
