import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import {
  DEFAULT_FLOW_BASE,
  MIN_PLATFORM_LIMIT_BYTES,
  UnitsError,
  bytesPerMb,
  bytesToWholeMbCeil,
  checkLocalLimit,
  checkWholeAmount,
  createLimitMbFor,
  flowBase,
  mbToBytes,
  platformLimitFor,
} from '../../src/accounting/units.ts';

describe('flow base', () => {
  test('1000 and 1024 are taken as given; 0, absent and others fall back to 1000', () => {
    assert.equal(flowBase(1000), 1000);
    assert.equal(flowBase(1024), 1024);
    assert.equal(flowBase(0), 1000);
    assert.equal(flowBase(undefined), 1000);
    assert.equal(flowBase(null), 1000);
    assert.equal(flowBase(1023), 1000);
    assert.equal(DEFAULT_FLOW_BASE, 1000);
  });
  test('bytes per MB', () => {
    assert.equal(bytesPerMb(1000), 1_000_000);
    assert.equal(bytesPerMb(1024), 1_048_576);
    assert.equal(bytesPerMb(), 1_000_000);
  });
});

describe('MB <-> bytes', () => {
  test('MB to bytes per base, fractions rounded down (balances never overstated)', () => {
    assert.equal(mbToBytes(1, 1000), 1_000_000);
    assert.equal(mbToBytes(1, 1024), 1_048_576);
    assert.equal(mbToBytes(0), 0);
    assert.equal(mbToBytes(12.5, 1024), 13_107_200);
    assert.equal(mbToBytes(0.0000015, 1000), 1);
    assert.equal(mbToBytes(0.0000009, 1000), 0);
    assert.equal(mbToBytes(-2, 1000), -2_000_000);
    assert.throws(
      () => mbToBytes(Number.NaN),
      (e: unknown) => e instanceof UnitsError && e.code === 'AMOUNT_INVALID',
    );
  });
  test('whole MB rounding at the boundary', () => {
    assert.equal(bytesToWholeMbCeil(1_000_000, 1000), 1);
    assert.equal(bytesToWholeMbCeil(1_000_001, 1000), 2);
    assert.equal(bytesToWholeMbCeil(1_048_576, 1024), 1);
    assert.equal(bytesToWholeMbCeil(1_048_577, 1024), 2);
    assert.equal(bytesToWholeMbCeil(0), 0);
  });
});

describe('local limits', () => {
  test('-1 and whole numbers >= 0 pass', () => {
    assert.equal(checkLocalLimit(-1), -1);
    assert.equal(checkLocalLimit(0), 0);
    assert.equal(checkLocalLimit(5_000_000), 5_000_000);
  });
  test('anything else is refused with the field named', () => {
    for (const bad of [-2, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      assert.throws(
        () => checkLocalLimit(bad, 'users.0.limitBytes'),
        (e: unknown) => e instanceof UnitsError && e.code === 'LIMIT_INVALID' && e.field === 'users.0.limitBytes',
      );
    }
  });
});

describe('set-limit limitFlow (bytes, -1 or >= 1024000)', () => {
  test('a local limit is clamped up to the platform minimum, never down', () => {
    assert.equal(MIN_PLATFORM_LIMIT_BYTES, 1_024_000);
    assert.equal(platformLimitFor(-1), -1);
    assert.equal(platformLimitFor(0), 1_024_000);
    assert.equal(platformLimitFor(1), 1_024_000);
    assert.equal(platformLimitFor(1_023_999), 1_024_000);
    assert.equal(platformLimitFor(1_024_000), 1_024_000);
    assert.equal(platformLimitFor(1_024_001), 1_024_001);
    assert.throws(() => platformLimitFor(-5), UnitsError);
  });
});

describe('create-sub-account limitFlow (MB)', () => {
  test('unlimited stays -1; limits round up to whole MB and never become 0', () => {
    assert.equal(createLimitMbFor(-1), -1);
    assert.equal(createLimitMbFor(0), 1);
    assert.equal(createLimitMbFor(1), 1);
    assert.equal(createLimitMbFor(1_000_000, 1000), 1);
    assert.equal(createLimitMbFor(1_000_001, 1000), 2);
    assert.equal(createLimitMbFor(1_048_576, 1024), 1);
    assert.equal(createLimitMbFor(1_048_577, 1024), 2);
    assert.equal(createLimitMbFor(5_000_000, 1024), 5);
    assert.equal(createLimitMbFor(5_000_000), 5);
  });
  test('the MB limit at the default base covers the bytes at either base', () => {
    for (const bytes of [1, 999_999, 1_000_000, 1_048_576, 5_242_880, 123_456_789]) {
      const mb = createLimitMbFor(bytes);
      assert.ok(mb * bytesPerMb(1000) >= bytes);
      assert.ok(mb * bytesPerMb(1024) >= bytes);
    }
  });
});

describe('traffic return amounts', () => {
  test('whole numbers >= 1', () => {
    assert.equal(checkWholeAmount(1, 'flowNum'), 1);
    assert.equal(checkWholeAmount(250, 'ipNum'), 250);
    for (const bad of [0, -1, 1.5, Number.NaN])
      assert.throws(
        () => checkWholeAmount(bad, 'flowNum'),
        (e: unknown) => e instanceof UnitsError && e.field === 'flowNum',
      );
  });
});
