// The shared test helpers themselves: the Prometheus reader and the polling helper.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findSample, parseSamples, sumSamples } from './prometheus.ts';
import { eventually, poll, waitFor } from './wait.ts';

const TEXT = [
  '# HELP rotor_bytes_total bytes',
  '# TYPE rotor_bytes_total counter',
  'rotor_bytes_total{user="alice",direction="up"} 10',
  'rotor_bytes_total{user="alice",direction="down"} 32',
  'rotor_bytes_total{user="bob",direction="up"} 5',
  'rotor_up 1',
  '',
].join('\n');

describe('test/support/prometheus', () => {
  test('samples with labels; comments skipped', () => {
    const all = parseSamples(TEXT);
    assert.equal(all.length, 4);
    assert.deepEqual(all[0], { name: 'rotor_bytes_total', labels: { user: 'alice', direction: 'up' }, value: 10 });
    assert.deepEqual(all[3], { name: 'rotor_up', labels: {}, value: 1 });
  });
  test('sum and first over a label subset', () => {
    assert.equal(sumSamples(TEXT, 'rotor_bytes_total', { user: 'alice' }), 42);
    assert.equal(sumSamples(TEXT, 'rotor_bytes_total'), 47);
    assert.equal(sumSamples(TEXT, 'rotor_missing'), 0);
    assert.equal(findSample(TEXT, 'rotor_bytes_total', { user: 'bob' }), 5);
    assert.equal(findSample(TEXT, 'rotor_bytes_total', { user: 'carol' }), undefined);
    assert.equal(findSample(TEXT, 'rotor_up'), 1);
  });
});

describe('test/support/wait', () => {
  test('poll resolves with the first settled value; a throwing probe rejects unless errors are ignored', async () => {
    let n = 0;
    assert.equal(await poll(() => (++n >= 3 ? n : undefined), { everyMs: 1 }), 3);
    await assert.rejects(
      poll(() => {
        throw new Error('boom');
      }),
      /boom/,
    );
    let m = 0;
    const v = await poll(
      () => {
        if (++m < 3) throw new Error('not yet');
        return 'ok';
      },
      { everyMs: 1, ignoreErrors: true },
    );
    assert.equal(v, 'ok');
  });
  test('timeouts name what was awaited; waitFor wants a truthy value; eventually says false', async () => {
    await assert.rejects(
      poll(() => undefined, { what: 'the moon', timeoutMs: 20, everyMs: 5 }),
      /the moon/,
    );
    await assert.rejects(
      waitFor(() => 0, 20, 'a truthy number', 5),
      /a truthy number/,
    );
    assert.equal(await eventually(() => false, 20, 5), false);
    assert.equal(await eventually(() => true, 20, 5), true);
  });
});
