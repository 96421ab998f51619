// The expiry watch warns about static instances near their end, and only about them: a dynamic (flow or IP
// count) order's instance has no expiry (the platform leaves userExpired 0 or absent, and its proxyType is
// 104/105), so it is never "expired" nor renewed. On the test store (SQLite, or Redis in the Redis pass).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ExpiryWatch } from '../../src/orders/expiry.ts';
import { derivedMerchantNo } from '../../src/orders/numbers.ts';
import type { InstanceRecord, JournalState, Store } from '../../src/store/types.ts';
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

describe('expiry watch: a renewal that ended failed counts like a refusal', () => {
  let store: Store;
  before(async () => {
    store = await openTestStore();
  });
  after(async () => {
    await store?.close();
  });

  // The numbers the watch derives for this expiry (src/orders/expiry.ts renewalNumber).
  const numberOf = (mark: string, attempt: number) => derivedMerchantNo('RA', attempt === 0 ? mark : `${mark}:${attempt}`);

  async function placed(no: string, journal: JournalState, orderStatus: number | undefined): Promise<void> {
    await store.addIntent({ merchantNo: no, operation: 'InstanceRenew', request: {}, reqId: `q${no}` });
    await store.updateJournal(no, { state: journal, ...(journal === 'accepted' ? { orderNo: `SO${no}` } : {}) });
    if (orderStatus !== undefined) {
      await store.putOrder({
        appOrderNo: no,
        orderNo: `SO${no}`,
        type: 2,
        status: orderStatus,
        amount: '1.00',
        count: 1,
        request: {},
        createdAt: NOW,
        updatedAt: NOW,
      });
    }
  }

  function watchOf(renewed: string[]) {
    const log = captureLogger('debug');
    const watch = new ExpiryWatch({
      store,
      placer: {
        renew: async (body: { appOrderNo: string }) => {
          renewed.push(body.appOrderNo);
          return undefined as never;
        },
      } as never,
      clock: { now: () => NOW },
      warnHours: 24,
      autoRenew: { enabled: true, hoursBefore: 24 },
      logger: log.logger,
    });
    return { watch, log };
  }

  test('after an accepted renewal whose order failed (4), the next number is placed; after a pending (1), unknown or succeeded one, nothing', async () => {
    const cases: Array<{ no: string; first: [JournalState, number | undefined]; expect: 'next' | 'none' }> = [
      { no: 'F4', first: ['accepted', 4], expect: 'next' },
      { no: 'P1', first: ['accepted', 1], expect: 'none' },
      { no: 'P2', first: ['accepted', 2], expect: 'none' },
      { no: 'S3', first: ['accepted', 3], expect: 'none' },
      { no: 'PA5', first: ['accepted', 5], expect: 'none' },
      // accepted but its order not read yet: not known to have failed
      { no: 'NR', first: ['accepted', undefined], expect: 'none' },
      { no: 'UN', first: ['unknown', undefined], expect: 'none' },
      { no: 'SE', first: ['sent', undefined], expect: 'none' },
      { no: 'RJ', first: ['rejected', undefined], expect: 'next' },
    ];
    for (const c of cases) {
      const expires = nowSec + 3600;
      await store.putInstances([instance(`I${c.no}`, 101, expires)]);
      const mark = `I${c.no}:${expires}`;
      await placed(numberOf(mark, 0), ...c.first);
    }
    const renewed: string[] = [];
    const { watch, log } = watchOf(renewed);
    await watch.check();
    for (const c of cases) {
      const mark = `I${c.no}:${nowSec + 3600}`;
      const second = renewed.includes(numberOf(mark, 1));
      assert.equal(second, c.expect === 'next', `${c.no} (${c.first.join('/')}): second renewal placed ${second}`);
      assert.equal(renewed.includes(numberOf(mark, 0)), false, `${c.no}: the first number is never placed again`);
    }
    assert.equal(renewed.length, 2);
    assert.equal(
      log
        .text()
        .split('\n')
        .filter((l) => l.includes('auto-renew order failed; placing another')).length,
      1,
    );
  });

  test('a failed renewal followed by one still pending: nothing more is placed until it ends', async () => {
    const expires = nowSec + 7200;
    await store.putInstances([instance('ICHAIN', 101, expires)]);
    const mark = `ICHAIN:${expires}`;
    await placed(numberOf(mark, 0), 'accepted', 4);
    await placed(numberOf(mark, 1), 'rejected', undefined);
    await placed(numberOf(mark, 2), 'accepted', 1);
    const renewed: string[] = [];
    // (the first test's instances are in the store too: only this expiry's numbers are looked at)
    const ours = () => renewed.filter((n) => [0, 1, 2, 3, 4].some((a) => n === numberOf(mark, a)));
    await watchOf(renewed).watch.check();
    assert.deepEqual(ours(), [], 'nothing placed while the third renewal is pending');
    await store.putOrder({ ...(await store.getOrder(numberOf(mark, 2)))!, status: 4 });
    await watchOf(renewed).watch.check();
    assert.deepEqual(ours(), [numberOf(mark, 3)], 'the fourth number placed once the pending renewal failed');
  });
});
