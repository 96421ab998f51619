// Users' own ports follow a burst of user changes (a batch through the admin API, a PATCH, a DELETE) by looking
// at the burst's own users, not at every user: an import of 100,000 users in bursts of 1,000 walked them all per
// burst (O(users²) over the import). The real daemon in-process on the embedded sandbox; what the user ports are
// handed per burst is counted by wrapping the daemon's own UserPorts methods, which still do the work.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { PortUser } from '../../src/users/ports.ts';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { importIntoStore } from '../../src/users/store-import.ts';
import { freePort } from '../support/ports.ts';
import { openTestStore } from '../support/store.ts';
import { poll } from '../support/wait.ts';

const EVERYONE = 2000;

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe("user ports follow a burst's own users", () => {
  let gw: Gateway;
  /** Users handed to the user ports since the last reset (sync: every user; update: the named ones). */
  let looked = 0;

  before(async () => {
    gw = await startGateway();
    const ports = gw.daemon.userPorts;
    const sync = ports.sync.bind(ports);
    const update = ports.update.bind(ports);
    ports.sync = (users: Iterable<PortUser>) => {
      const list = [...users];
      looked += list.length;
      return sync(list);
    };
    ports.update = (changed: Iterable<PortUser>, gone: Iterable<string>) => {
      const c = [...changed];
      const g = [...gone];
      looked += c.length + g.length;
      return update(c, g);
    };
    // A directory of 2,000 users in two batches (generated passwords: no scrypt), the last with a port: once
    // it is open, the bursts of the setup are over.
    for (let b = 0; b < EVERYONE / 1000; b++) {
      const rows = Array.from({ length: 1000 }, (_, i) => ({
        name: `imp${b}x${String(i).padStart(4, '0')}`,
        mainAccount: 'shop1',
        ...(b === EVERYONE / 1000 - 1 && i === 999 ? { listen: { port: 0, allowIps: ['127.0.0.1/32'] } } : {}),
      }));
      const r = await gw.admin<{ created: number; errors: unknown[] }>('/v1/users/batch', { body: { users: rows } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body.errors, []);
    }
    await poll(() => gw.daemon.userPorts.portOf('imp1x0999') !== undefined, { what: "the setup's port", timeoutMs: 30_000 });
  });
  after(async () => {
    await gw?.close();
  });

  test('a batch of 3 users: its port opens, and only its 3 users are looked at', async () => {
    looked = 0;
    const rows = [
      { name: 'late1', mainAccount: 'shop1', listen: { port: 0, allowIps: ['127.0.0.1/32'] } },
      { name: 'late2', mainAccount: 'shop1' },
      { name: 'late3', mainAccount: 'shop1' },
    ];
    const r = await gw.admin<{ created: number }>('/v1/users/batch', { body: { users: rows } });
    assert.equal(r.body.created, 3);
    await poll(() => gw.daemon.userPorts.portOf('late1') !== undefined, { what: "late1's port", timeoutMs: 10_000 });
    assert.ok(await answers(gw.daemon.userPorts.portOf('late1')!), "late1's port answers");
    assert.ok(gw.daemon.userPorts.portOf('imp1x0999') !== undefined, 'the other ports stay open');
    assert.ok(looked <= 3, `the burst looked at ${looked} users`);
  });

  test('a PATCH moves one port and a DELETE closes one, each looking at its own user', async () => {
    const before = gw.daemon.userPorts.portOf('imp1x0999')!;
    const to = await freePort();
    looked = 0;
    const moved = await gw.admin(`/v1/users/imp1x0999`, { method: 'PATCH', body: { listen: { port: to, allowIps: ['127.0.0.1/32'] } } });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    const d = await gw.admin(`/v1/users/late1`, { method: 'DELETE' });
    assert.ok(d.status === 200 || d.status === 204, `DELETE: ${d.status}`);
    await poll(() => gw.daemon.userPorts.portOf('late1') === undefined && gw.daemon.userPorts.portOf('imp1x0999') === to, {
      what: "late1's port closed and imp1x0999's moved",
      timeoutMs: 10_000,
    });
    assert.ok(await answers(to), 'the moved port answers');
    assert.ok(!(await answers(before)), 'the old port is closed');
    assert.ok(looked <= 2, `the bursts looked at ${looked} users`);
    // A reload names nobody: every user is looked at.
    looked = 0;
    await gw.daemon.reload(gw.config);
    assert.ok(looked >= EVERYONE, `a reload looked at ${looked} users`);
    assert.equal(gw.daemon.userPorts.portOf('imp1x0999'), to, 'the reload kept the port');
  });
});

test('users whose creation the start resumes (rotor users import --store) get their ports', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-ports-resumed-'));
  const path = join(dir, 'rotor.db');
  try {
    // 2,000 intents, every 100th with a port of its own: the start resumes them in the background, 1,000 made
    // ready at a time, while the daemon is still being put together.
    const store = await openTestStore(path);
    const rows = Array.from({ length: 2000 }, (_, i) => ({
      name: `res${String(i).padStart(4, '0')}`,
      mainAccount: 'shop1',
      ...(i % 100 === 0 ? { listen: { port: 0, allowIps: ['127.0.0.1/32'] } } : {}),
    }));
    const written = await importIntoStore(store, rows, { reservedPorts: new Map(), configUsers: ['alice', 'bob'], tls: false });
    assert.equal(written.created, 2000);
    await store.close();
    const gw = await startGateway({ config: { store: { path } } });
    try {
      const withPorts = rows.filter((r) => r.listen !== undefined).map((r) => r.name);
      await poll(() => withPorts.every((n) => gw.daemon.userPorts.portOf(n) !== undefined), {
        what: "every resumed user's port",
        timeoutMs: 60_000,
      });
      for (const n of withPorts) assert.ok(await answers(gw.daemon.userPorts.portOf(n)!), `${n}'s port answers`);
    } finally {
      await gw.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
