// bench/cpu-table.ts: `npm run bench`'s CPU per operation is the CPU of all measured windows over their
// operations (as bench/ab.ts reads it), not a median of per-repetition ratios.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CPU_HEADERS, cpuDetailRows, cpuRows, type CpuWindow } from '../../bench/cpu-table.ts';

const w = (path: string, rep: number, ops: number, gateway: number, main: number): CpuWindow => ({
  key: 'M1',
  path,
  rep,
  ops,
  seconds: 2,
  cpu: { gateway, upstream: ops * 0.2, target: ops * 0.1 },
  gatewayMain: main,
});

test('a gateway slowed in one repetition weighs by its operations: sum of CPU over sum of operations', () => {
  // Per repetition 0.5, 0.3, 0.3 ms per request: the median read 0.3, the slow repetition's few requests count
  // for what they are: (500 + 900 + 900) / (1000 + 3000 + 3000).
  const rows = cpuRows([w('rotor', 0, 1000, 500, 400), w('rotor', 1, 3000, 900, 800), w('rotor', 2, 3000, 900, 850)], ['direct', 'rotor']);
  assert.equal(rows.length, 1);
  const row = Object.fromEntries(CPU_HEADERS.map((h, i) => [h, rows[0]![i]]));
  assert.equal(row.path, 'rotor');
  assert.equal(row.per, 'request');
  assert.equal(row.gateway, '0.329');
  assert.equal(row['(main'], '0.293');
  assert.equal(row['+ other)'], '0.0357');
  assert.equal(row.upstream, '0.200');
  assert.equal(row.client, '-');
  assert.equal(row.ops, '7000');
});

test('a path without a gateway shows no gateway column; rows follow the order the cases were measured', () => {
  const direct: CpuWindow = { key: 'M2 connect', path: 'direct', rep: 0, ops: 100, seconds: 2, cpu: { upstream: 40, client: 30 } };
  const rows = cpuRows([direct, w('minimal', 0, 10, 5, 4)], ['direct', 'minimal', 'rotor']);
  assert.deepEqual(
    rows.map((r) => [r[0], r[2], r[3]]),
    [
      ['M2 connect', 'direct', '-'],
      ['M1', 'minimal', '0.500'],
    ],
  );
  assert.equal(rows[0]![CPU_HEADERS.indexOf('sum')], '0.700');
  assert.deepEqual(cpuDetailRows([direct, w('minimal', 0, 10, 5, 4)]), [
    ['M1', '1', 'minimal', '10', '5.00', '5.00', '4.00', '1.00', '0.500'],
  ]);
});
