// rotor_flow_balance_bytes{account,product} is one series per (main account, product) a user draws from: a
// reseller giving each customer a main account of its own had one per customer. It is bounded like the
// per-user and per-pool series: at most metrics.userSeriesMax pairs, the lowest balances first (the ones an
// operator's "balance running out" alert is about), and rotor_flow_balance_pairs{state} counts every pair.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMetrics } from '../../src/telemetry/metrics.ts';

const samples = (text: string, name: string): string[] => text.split('\n').filter((l) => l.startsWith(`${name}{`));

test('10,000 (account, product) balances: at most max series, the lowest first, every pair counted', async () => {
  const metrics = createMetrics({ defaultMetrics: false });
  metrics.balanceSeries.max = 100;
  for (let i = 0; i < 10_000; i++) {
    // What BalanceWatcher.record writes; 99 accounts have run out (acct100, acct200, …), the others hold 1 GB + i bytes.
    metrics.flowBalance.set({ account: `acct${i}`, product: 'DYN-105-FLOW' }, i % 100 === 0 && i > 0 ? 0 : 1e9 + i);
  }
  // A pair written again keeps one entry (its latest value).
  metrics.flowBalance.set({ account: 'acct1', product: 'DYN-105-FLOW' }, 5);
  const text = await metrics.registry.metrics();
  const lines = samples(text, 'rotor_flow_balance_bytes');
  assert.equal(lines.length, 100);
  // The 99 empty accounts, then acct1 (5 bytes); none of the funded ones.
  assert.equal(lines.filter((l) => l.endsWith(' 0')).length, 99);
  assert.ok(lines.includes('rotor_flow_balance_bytes{account="acct1",product="DYN-105-FLOW"} 5'), lines.slice(0, 3).join('\n'));
  assert.match(text, /^rotor_flow_balance_pairs\{state="empty"\} 99$/m);
  assert.match(text, /^rotor_flow_balance_pairs\{state="funded"\} 9901$/m);
  assert.ok(Buffer.byteLength(text) < 16 * 1024, `${Buffer.byteLength(text)} bytes`);
});

test('under the bound every pair is shown with its latest value; a removed pair goes', async () => {
  const metrics = createMetrics({ defaultMetrics: false });
  metrics.flowBalance.set({ account: 'shop1', product: 'A' }, 10);
  metrics.flowBalance.set({ account: 'shop1', product: 'A' }, 7);
  metrics.flowBalance.set({ account: 'shop2', product: 'A' }, 0);
  metrics.flowBalance.set({ account: 'shop3', product: 'B' }, 3);
  metrics.flowBalance.remove({ account: 'shop3', product: 'B' });
  const text = await metrics.registry.metrics();
  assert.deepEqual(samples(text, 'rotor_flow_balance_bytes').sort(), [
    'rotor_flow_balance_bytes{account="shop1",product="A"} 7',
    'rotor_flow_balance_bytes{account="shop2",product="A"} 0',
  ]);
  // The same values through get() (what the dashboard's sampler reads).
  const got = await metrics.flowBalance.get();
  assert.equal(got.values.length, 2);
  assert.match(text, /^rotor_flow_balance_pairs\{state="funded"\} 1$/m);
});
