// When the sandbox writes its state file (src/sim/platform/persist.ts): after a change only (reads and an idle
// sandbox write nothing), soon enough that a process killed without a close keeps what it made, and in a form
// a restarted sandbox reads back — also at a reseller's size, where the write is made in pieces.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimulator, type Simulator } from '../../src/sim/index.ts';
import { clientFor, waitFor } from './helpers.ts';

const dirs: string[] = [];
const sims: Simulator[] = [];
after(async () => {
  for (const s of sims) await s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function sandbox(file: string): Promise<Simulator> {
  const sim = await startSimulator({ upstreams: false, stateFile: file, statePersist: { intervalMs: 20 } });
  sims.push(sim);
  return sim;
}

const saved = (file: string): { subs: { appUsername: string; limits: [string, number][] }[] } =>
  JSON.parse(readFileSync(file, 'utf8')) as { subs: { appUsername: string; limits: [string, number][] }[] };

describe('sandbox state file', () => {
  test('a change is written without a close; reads and idle time write nothing; a new sandbox reads it back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotor-sim-writes-'));
    dirs.push(dir);
    const file = join(dir, 'rotor.db.sandbox.json');
    const sim = await sandbox(file);
    const client = clientFor(sim);
    await client.call('CreateUser', { appUsername: 'shop', status: 1 });
    await client.call('CreateProxyUser', { appMainUsername: 'shop', appUsername: 'cust1', limitFlow: -1, status: 1 });
    await waitFor(() => sim.stateWrites() > 0 && saved(file).subs.some((s) => s.appUsername === 'cust1'), 20_000);
    // The file is renamed into place a moment before its write is counted: let that write settle first.
    await sim.stateSettled();

    // Reads only: the file stays as it is (the same inode, the same count of writes).
    const writes = sim.stateWrites();
    const ino = statSync(file).ino;
    for (let i = 0; i < 20; i++) await client.call('GetProxyUserInfo', { appUsername: 'cust1', productNo: 'DYN-104-FLOW' });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(sim.stateWrites(), writes, 'reads and idle ticks write nothing');
    assert.equal(statSync(file).ino, ino);

    // A write again: the next tick writes it.
    await client.call('SetProxyUserFlowLimit', { appUsername: 'cust1', productNo: 'DYN-104-FLOW', limitFlow: 5_000_000 });
    await waitFor(() => saved(file).subs.find((s) => s.appUsername === 'cust1')?.limits.length === 1, 20_000);
    await sim.stateSettled();
    assert.equal(sim.stateWrites(), writes + 1);

    // The first sandbox is never closed (a killed process): a second one on the same file knows the sub account.
    const again = await sandbox(file);
    const info = await clientFor(again).call('GetProxyUserInfo', { appUsername: 'cust1', productNo: 'DYN-104-FLOW' });
    assert.equal(info.appUsername, 'cust1');
    assert.equal(info.limitFlow, 5_000_000);
    assert.equal(again.stateWrites(), 0, 'a state just read is not written back');
  });

  test('20,000 sub accounts made 16 at a time: written while they are made, and read back whole', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotor-sim-writes-'));
    dirs.push(dir);
    const file = join(dir, 'rotor.db.sandbox.json');
    const sim = await sandbox(file);
    const client = clientFor(sim);
    await client.call('CreateUser', { appUsername: 'shop', status: 1 });
    const names = Array.from({ length: 20_000 }, (_, i) => `c${String(i).padStart(6, '0')}`);
    // 16 at a time over real HTTP: the file is written while they are made.
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < names.length) {
          const appUsername = names[next++]!;
          await client.call('CreateProxyUser', { appMainUsername: 'shop', appUsername, limitFlow: -1, status: 1 });
        }
      }),
    );
    // Written while they were made (each write in pieces of 1,000 records, the server answering between them),
    // and the last change written after.
    assert.ok(sim.stateWrites() >= 2, `writes during the creations: ${sim.stateWrites()}`);
    // The main account's own record is a sub account too.
    await waitFor(() => saved(file).subs.length === 20_001, 60_000, 'every sub account in the file');
    const again = await sandbox(file);
    const info = await clientFor(again).call('GetProxyUserInfo', { appUsername: 'c019999', productNo: 'DYN-104-FLOW' });
    assert.equal(info.appUsername, 'c019999');
  });
});
