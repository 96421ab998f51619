// A user's verified login stays cached in the router while other users change (issue 24: at 100,000 users an
// import or a dashboard edit changes users all the time). Before, every user change cleared the router's
// whole cache, so each connected user's next connection was checked again. A change to the user itself still
// invalidates its own entry (the directory hands out a new user object, the cache checks identity).
// Real daemon, real SOCKS5 logins over TCP; the users table's verify calls are counted, not replaced.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { once } from 'node:events';
import { startGateway } from './harness.ts';

/** A SOCKS5 greeting and username/password login; resolves the login's status byte (0 = accepted). */
async function socksLogin(port: number, user: string, pass: string): Promise<number> {
  const s = connect({ host: '127.0.0.1', port });
  await once(s, 'connect');
  const chunks: Buffer[] = [];
  const need = async (n: number): Promise<Buffer> => {
    for (;;) {
      const all = Buffer.concat(chunks);
      if (all.length >= n) {
        chunks.length = 0;
        if (all.length > n) chunks.push(all.subarray(n));
        return all.subarray(0, n);
      }
      const [c] = (await once(s, 'data')) as [Buffer];
      chunks.push(c);
    }
  };
  try {
    s.write(Buffer.from([5, 1, 2]));
    assert.deepEqual([...(await need(2))], [5, 2]);
    s.write(Buffer.concat([Buffer.from([1, user.length]), Buffer.from(user), Buffer.from([pass.length]), Buffer.from(pass)]));
    return (await need(2))[1]!;
  } finally {
    s.destroy();
  }
}

test("another user's change keeps a user's login cached; its own change checks it again", async () => {
  const gw = await startGateway();
  try {
    // The router checks passwords on the users' table (src/admission/users.ts) the directory writes.
    const users = gw.daemon.users.table as unknown as { verify: (...args: unknown[]) => unknown };
    const real = users.verify.bind(users);
    let checks = 0;
    users.verify = (...args: unknown[]) => {
      checks++;
      return real(...args);
    };
    assert.equal(await socksLogin(gw.ports.socks5, 'alice', 'alice-pass'), 0);
    assert.equal(checks, 1);
    assert.equal(await socksLogin(gw.ports.socks5, 'alice', 'alice-pass'), 0);
    assert.equal(checks, 1, 'cached');
    // Another user is created and changed.
    const made = await gw.admin('/v1/users', { body: { name: 'carol', mainAccount: 'shop1' } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal((await gw.admin('/v1/users/carol', { method: 'PATCH', body: { rateBytesPerSec: 1000 } })).status, 200);
    assert.equal(await socksLogin(gw.ports.socks5, 'alice', 'alice-pass'), 0);
    assert.equal(checks, 1, "alice's login stayed cached through carol's changes");
    // Alice's own change: checked again.
    assert.equal((await gw.admin('/v1/users/alice', { method: 'PATCH', body: { rateBytesPerSec: 2000 } })).status, 200);
    assert.equal(await socksLogin(gw.ports.socks5, 'alice', 'alice-pass'), 0);
    assert.equal(checks, 2, "alice's own change invalidates her cached login");
  } finally {
    await gw.close();
  }
});
