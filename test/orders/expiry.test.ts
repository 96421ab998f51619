// The expiry watch warns about static instances near their end, and only about them: a dynamic (flow or IP
// count) order's instance has no expiry (the platform leaves userExpired 0 or absent, and its proxyType is
// 104/105), so it is never "expired" nor renewed. On the test store (SQLite, or Redis in the Redis pass).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ExpiryWatch } from '../../src/orders/expiry.ts';
import type { InstanceRecord, Store } from '../../src/store/types.ts';
import { captureLogger } from '../support/logger.ts';
import { openTestStore } from '../support/store.ts';

const NOW = Date.UTC(2026, 5, 1, 12, 0, 0);
const nowSec = Math.floor(NOW / 1000);

function instance(no: string, proxyType: number, userExpired: number | null): InstanceRecord {
  return {
    instanceNo: no,
    orderNo: `O${no}`,
    productNo: proxyType >= 104 ? 'DYN-104-FLOW' : 'STC-101-USA-SOCKS',
    status: 3,
    ip: proxyType >= 104 ? '' : '127.0.0.1',
    port: proxyType >= 104 ? 0 : 9000,
    username: 'u',
    pwd: null,
    protocol: '1',
    userExpired,
    raw: { instanceNo: no, proxyType, userExpired },
    updatedAt: NOW,
  };
}

describe('expiry watch: static instances only', () => {
  let store: Store;
  before(async () => {
    store = await openTestStore();
  });
  after(async () => {
    await store?.close();
  });

  test('no warning or renewal for dynamic instances (userExpired 0, absent, or a dynamic proxyType); static ones still warned', async () => {
    await store.putInstances([
      instance('DYN0', 104, 0),
      instance('DYNNULL', 105, null),
      // A platform that puts a date on a dynamic package: still not a static instance to warn about or renew.
      instance('DYNDATE', 104, nowSec - 3600),
      instance('STCOLD', 101, nowSec - 7200),
      instance('STCSOON', 101, nowSec + 3600),
      // A static record with no expiry from the platform: nothing to warn about.
      instance('STCZERO', 101, 0),
    ]);
    const log = captureLogger('debug');
    const renewed: string[] = [];
    const watch = new ExpiryWatch({
      store,
      placer: {
        renew: async (body: { instances: Array<{ instanceNo: string }> }) => {
          renewed.push(...body.instances.map((i) => i.instanceNo));
          return undefined as never;
        },
      } as never,
      clock: { now: () => NOW },
      warnHours: 24,
      autoRenew: { enabled: true, hoursBefore: 24 },
      logger: log.logger,
    });
    await watch.check();
    const lines = log
      .text()
      .split('\n')
      .filter((l) => l.includes('static instance'));
    const named = (no: string) => lines.filter((l) => l.includes(`"${no}"`));
    for (const no of ['DYN0', 'DYNNULL', 'DYNDATE', 'STCZERO']) assert.deepEqual(named(no), [], `${no} not warned about`);
    assert.equal(named('STCOLD').length, 1);
    assert.match(named('STCOLD')[0]!, /has expired/);
    assert.equal(named('STCSOON').length, 1);
    assert.match(named('STCSOON')[0]!, /expires soon/);
    assert.deepEqual(renewed, ['STCSOON'], 'only the running static instance before its end is renewed');
    assert.equal(
      lines.some((l) => /hoursLeft":-4\d{5}/.test(l)),
      false,
    );
  });
});
