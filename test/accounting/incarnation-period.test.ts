// A name made again (usage key `<name>~<n>`) whose quota period changes back to `total` (PATCH quota.period): the
// meter loads its own key's stored usage, not the plain name's (the deleted customer's): a load of another key never
// landed, the meter stayed `loading` for good and the flush never wrote its bytes again (lost at the restart).
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openTestStore } from '../support/store.ts';
import { Accounting } from '../../src/accounting/accounting.ts';

const dirs: string[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function open(path: string) {
  const store = await openTestStore(path);
  const accounting = new Accounting({ store, flushIntervalMs: 60_000 });
  await accounting.start([]);
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await accounting.close();
    await store.close();
  };
  cleanups.push(close);
  return { store, accounting, close };
}

test('a name made again whose quota period changes to total: its bytes are written under its own key and survive a restart', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-r11-'));
  dirs.push(dir);
  const path = join(dir, 'rotor.db');
  const a = await open(path);
  // The first customer of the name, on a monthly quota: 5000 B.
  await a.accounting.upsertUser({ name: 'erin', limitBytes: 1_000_000, period: 'month' });
  a.accounting.meter('erin').add(0, 5000);
  await a.accounting.flush();
  a.accounting.removeUser('erin');
  // Made again (another customer), monthly too; then its quota is patched to `total`.
  await a.accounting.upsertUser({ name: 'erin', limitBytes: 1_000_000, period: 'month', usageKey: 'erin~77' });
  a.accounting.meter('erin').add(0, 100);
  await a.accounting.flush();
  await a.accounting.upsertUser({ name: 'erin', limitBytes: 1_000_000, period: 'total', usageKey: 'erin~77' });
  a.accounting.meter('erin').add(0, 2000);
  await a.accounting.flush();
  const stored = (await a.store.getUsage('erin~77'))?.usedBytes ?? 0;
  const plain = (await a.store.getUsage('erin'))?.usedBytes ?? 0;
  await a.close();
  const b = await open(path);
  await b.accounting.upsertUsers([{ name: 'erin', limitBytes: 1_000_000, period: 'total', usageKey: 'erin~77' }]);
  const after = b.accounting.get('erin')?.usedBytes ?? 0;
  assert.ok(
    stored === 2000 && after === 2000,
    `2000 B moved on the 'total' quota: stored under erin~77 after a flush: ${stored} B (the plain 'erin' row of the ` +
      `deleted customer: ${plain} B); after a restart the customer has used ${after} B`,
  );
});
