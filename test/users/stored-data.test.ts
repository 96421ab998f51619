// Stored user records read back at start (src/users/record.ts readStoredData): a plain record (what a batch
// import writes) takes a field-by-field check and shares its empty rules and repeated strings with the others;
// it reads back exactly as the schema reads it, an invalid one is refused as the schema refuses it, and every
// other record (older fields missing, rules, a listen port) goes through the schema with its defaults.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readStoredData } from '../../src/users/record.ts';

const plain = (over: Record<string, unknown> = {}) => ({
  name: 'c000001',
  mainAccount: 'bench',
  product: 'DYN-105-FLOW',
  draw: 'pwd',
  sessTime: 5,
  quota: { bytes: 10 * 1024 ** 3, period: 'month' },
  rateBytesPerSec: 0,
  maxConnections: 0,
  expiresAt: null,
  enabled: true,
  pricePerGb: null,
  listen: null,
  rules: { denyPorts: [], denyHosts: [], allowPorts: [], allowHosts: [] },
  requestRules: [],
  metrics: false,
  source: 'api',
  createdAt: 1_795_000_000_000,
  ...over,
});

test('a plain record reads back whole, its empty rules shared and frozen', () => {
  const a = readStoredData('c000001', JSON.parse(JSON.stringify(plain())));
  const b = readStoredData('c000002', JSON.parse(JSON.stringify(plain({ name: 'c000002' }))));
  // Records stored before `instances` and `products` existed read back with them null (every running instance,
  // every product), as new ones do.
  assert.deepEqual(a, { ...plain(), instances: null, products: null });
  assert.deepEqual(readStoredData('c000001', plain({ instances: null, products: null })), { ...plain(), instances: null, products: null });
  // A record naming products is read through the schema, the list kept.
  assert.deepEqual(readStoredData('c000001', plain({ products: ['DYN-104-IP'] }))?.products, ['DYN-104-IP']);
  assert.ok(a && b);
  assert.equal(a.rules, b.rules, 'one rules object for both');
  assert.equal(a.requestRules, b.requestRules);
  assert.ok(Object.isFrozen(a.rules) && Object.isFrozen(a.rules.denyHosts) && Object.isFrozen(a.requestRules));
  assert.throws(() => (a.rules.denyHosts as string[]).push('x'), TypeError);
});

test('invalid plain records are refused as the schema refuses them', () => {
  for (const bad of [
    { sessTime: -2 },
    { sessTime: 121 },
    { sessTime: 5.5 },
    { quota: { bytes: -2, period: 'month' } },
    { quota: { bytes: 1, period: 'year' } },
    { quota: { bytes: 1, period: 'month', extra: 1 } },
    { mainAccount: 'has space' },
    { mainAccount: '' },
    { draw: 'link' },
    { maxConnections: 1_000_001 },
    { rules: { denyPorts: [], denyHosts: [], allowPorts: [], allowHosts: [], other: [] } },
  ])
    assert.equal(readStoredData('c000001', plain(bad)), undefined, JSON.stringify(bad));
  assert.equal(readStoredData('bad name', plain()), undefined);
});

test('other records go through the schema: defaults for fields added later, rules and a listen port as stored', () => {
  const old = readStoredData('olduser', { mainAccount: 'shop', source: 'api', createdAt: 5, quota: { bytes: 100, period: 'total' } });
  assert.ok(old);
  assert.equal(old.sessTime, 5);
  assert.deepEqual(old.rules, { denyPorts: [], denyHosts: [], allowPorts: [], allowHosts: [] });
  assert.equal(Object.isFrozen(old.rules), false);
  const ruled = readStoredData(
    'c000001',
    plain({ rules: { denyPorts: [25], denyHosts: ['example.com'], allowPorts: [], allowHosts: [] } }),
  );
  assert.deepEqual(ruled?.rules.denyPorts, [25]);
  const listening = readStoredData('c000001', plain({ listen: { port: 40_000, allowIps: ['127.0.0.1'] } }));
  assert.equal(listening?.listen?.port, 40_000);
  assert.equal(readStoredData('c000001', plain({ listen: { port: 70_000, allowIps: [] } })), undefined);
});
