// balance.low's line read at every balance, so a reload (SIGHUP, events.balanceLowMb) moves it at once: a
// balance that was fine under the old line is low under the new one, and moving the line back ends the spell.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { balanceLowListener, Events } from '../../src/events/index.ts';
import { openTestStore } from '../support/store.ts';
import { waitFor } from '../support/wait.ts';

test('balance.low follows a changed balanceLowMb without a new listener', async () => {
  const store = await openTestStore();
  const events = new Events({ store, deliver: false });
  let lineMb = 100;
  const low = balanceLowListener(events, () => lineMb);
  const balance = {
    account: 'shop1',
    productNo: 'P1',
    balanceMb: 500,
    balanceBytes: 500 * 1_048_576,
    hasBalance: true,
    ipTotal: undefined,
  };
  const lows = async () =>
    (await store.listEvents()).filter((e) => e.type === 'balance.low').map((e) => (e.data as { thresholdMb: number }).thresholdMb);
  low(balance);
  lineMb = 1000;
  low(balance);
  await waitFor(async () => ((await lows()).length === 1 ? true : undefined), 5000, 'balance.low under the new line');
  assert.deepEqual(await lows(), [1000]);
  // Back under the old line: the spell ends (its marker is cleared before the next write on the same store
  // connection), so raising the line again announces a new spell.
  lineMb = 100;
  low(balance);
  lineMb = 600;
  low(balance);
  await waitFor(async () => ((await lows()).length === 2 ? true : undefined), 5000, 'a second balance.low spell');
  assert.deepEqual(await lows(), [1000, 600]);
  await store.close();
});
