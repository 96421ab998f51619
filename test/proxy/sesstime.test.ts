// `-sesstime-` precedence (README "User name options"): a session's length is set by the connection that
// starts it (its `-sesstime-`, else the user's `sessTime`). While the session runs, a `-sesstime-` on a later
// connection with the same id does not change it; once the session has ended, the next connection starts a
// new one with its own `-sesstime-`. Router + the real SessionTable on an injected clock; the dialer is a
// stand-in that hands back one end of a socket pair (what is tested is which node, and for how long).
import assert from 'node:assert/strict';
import { Socket } from 'node:net';
import { describe, test } from 'node:test';
import type { UpstreamNode } from '../../src/pool/types.ts';
import { Router, type Dialer } from '../../src/proxy/router.ts';
import { SessionTable } from '../../src/session/table.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { FixedPool, FixedPools, Users, node, user } from './fixtures.ts';

const MINUTE = 60_000;

describe('-sesstime- for a session id that already has a session', () => {
  test('the session keeps the length it began with; a new session after it ends takes the new one', async () => {
    let now = 1_000_000;
    const clock = () => now;
    const nodes: UpstreamNode[] = [node('socks5', 1001), node('socks5', 1002), node('socks5', 1003)];
    const sessions = new SessionTable({ now: clock });
    const dialed: string[] = [];
    const fake: Dialer = async (n) => {
      dialed.push(n.id);
      return { socket: new Socket(), head: null };
    };
    const router = new Router({
      users: new Users([user('alice', 'pw', { sessTime: 10 })]),
      meters: new UnlimitedMeters(),
      pools: new FixedPools(new FixedPool(nodes)),
      sessions,
      dialers: { socks5: fake },
      now: clock,
    });
    const connectAs = async (name: string): Promise<string> => {
      const a = router.authorize(name, 'pw');
      assert.ok(a.ok, name);
      const d = await router.dial(a.route, { host: 'example.com', port: 80 });
      d.release();
      d.socket.destroy();
      return d.node.id;
    };

    // The first connection starts the session: 2 minutes.
    const first = await connectAs('alice-session-s1-sesstime-2');
    assert.equal(sessions.get('alice', 's1')?.expiresAt, now + 2 * MINUTE);
    // A later connection asks for 30 minutes: same node, and the session still ends at 2 minutes.
    now += MINUTE;
    assert.equal(await connectAs('alice-session-s1-sesstime-30'), first);
    assert.equal(sessions.get('alice', 's1')?.expiresAt, now + MINUTE, 'the running session was not lengthened');
    // Without the option, the user's sessTime (10) does not lengthen it either.
    assert.equal(await connectAs('alice-session-s1'), first);
    assert.equal(sessions.get('alice', 's1')?.expiresAt, now + MINUTE);
    // Past the 2 minutes: a new session on another node, with the 30 minutes asked for now.
    now += MINUTE + 1;
    const second = await connectAs('alice-session-s1-sesstime-30');
    assert.notEqual(second, first);
    assert.equal(sessions.get('alice', 's1')?.expiresAt, now + 30 * MINUTE);
    assert.deepEqual(dialed.length, 4, 'every connection dialed its node');
  });
});
