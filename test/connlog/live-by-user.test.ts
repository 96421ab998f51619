// The portal's live list is one customer's open connections (ConnectionLog.active(user), every 5 s per open
// page). They are kept per user, threaded through the connections as the live list is, so a poll walks that
// customer's connections only, not every open connection of the daemon. Exact at every open, user set and end
// (checked against the whole list filtered), gone with a user's last connection, and a poll's CPU time the same
// with 10,000 other customers' connections open as with none.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConnectionLog } from '../../src/connlog/recorder.ts';
import type { ConnectionContext } from '../../src/connlog/types.ts';

/** What the whole list says of one user: the reference a user's own list must equal. */
function filtered(log: ConnectionLog, user: string): string[] {
  return log
    .active()
    .filter((c) => c.user === user)
    .map((c) => c.id);
}

test("one user's live list equals the whole list's filtered, oldest first, through opens, late logins, refusals and ends", () => {
  let n = 0;
  const log = new ConnectionLog({ ids: () => `c${++n}` });
  // A small deterministic generator: the same interleavings every run.
  let seed = 7;
  const rand = (k: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % k;
  };
  const users = ['ann', 'bob', 'cid', 'dee'];
  const open: ConnectionContext[] = [];
  for (let step = 0; step < 4000; step++) {
    const what = rand(10);
    if (what < 4 || open.length === 0) open.push(log.open('socks5', '127.0.0.1'));
    else if (what < 7) {
      // A login: the user is known after the handshake, so later-opened connections may log in first.
      const c = open[rand(open.length)]!;
      if (c.user === null) c.user = users[rand(users.length)]!;
    } else if (what < 8) {
      // A refusal names the user it was about (maybe another than a guess before it), then ends.
      const i = rand(open.length);
      const c = open[i]!;
      c.user = users[rand(users.length)]!;
      c.end({ result: 'auth_failed' });
      open.splice(i, 1);
    } else {
      const i = rand(open.length);
      open[i]!.end({ result: 'ok', reason: 'closed' });
      open.splice(i, 1);
    }
    if (step % 50 === 0)
      for (const u of users)
        assert.deepEqual(
          log.active(u).map((c) => c.id),
          filtered(log, u),
          `${u} at step ${step}`,
        );
  }
  for (const u of users)
    assert.deepEqual(
      log.active(u).map((c) => c.id),
      filtered(log, u),
    );
  assert.deepEqual(log.active('ann', 2), log.active('ann').slice(0, 2), 'at most `max`, the oldest');
  for (const c of open) c.end({ result: 'ok', reason: 'closed' });
  assert.equal(log.active().length, 0);
  assert.equal(log.openUsers, 0, "a user's list goes with its last connection");
  for (const u of users) assert.deepEqual(log.active(u), []);
  // Set after its end, a user is no open connection of anyone's.
  const late = log.open('http', '127.0.0.1');
  late.end({ result: 'ok' });
  late.user = 'ann';
  assert.deepEqual([log.active('ann'), log.openUsers], [[], 0]);
});

/** CPU time (µs, this process: user + system) of `polls` polls of `user`'s list. */
function pollCpu(log: ConnectionLog, user: string, polls: number): number {
  const t0 = process.cpuUsage();
  let seen = 0;
  for (let i = 0; i < polls; i++) seen += log.active(user, 200).length;
  const t = process.cpuUsage(t0);
  assert.equal(seen, polls * 3);
  return t.user + t.system;
}

test("one customer's poll costs the same with 10,000 other customers' connections open as with none", (t) => {
  const log = new ConnectionLog();
  const mine: ConnectionContext[] = [];
  for (let i = 0; i < 3; i++) {
    const c = log.open('socks5', '127.0.0.1');
    c.user = 'portal-customer';
    c.bytes = { up: i, down: 10 * i };
    mine.push(c);
  }
  const POLLS = 2000;
  pollCpu(log, 'portal-customer', POLLS); // warm-up: compiled before anything is timed
  const alone = Math.min(pollCpu(log, 'portal-customer', POLLS), pollCpu(log, 'portal-customer', POLLS));
  const others: ConnectionContext[] = [];
  for (let i = 0; i < 10_000; i++) {
    const c = log.open('socks5', '127.0.0.1');
    c.user = `other${i}`;
    others.push(c);
  }
  pollCpu(log, 'portal-customer', POLLS);
  const crowded = Math.min(pollCpu(log, 'portal-customer', POLLS), pollCpu(log, 'portal-customer', POLLS));
  const perPoll = (us: number): string => `${(us / POLLS).toFixed(3)} µs`;
  t.diagnostic(`one poll: ${perPoll(alone)} alone, ${perPoll(crowded)} beside 10,000 other customers' connections`);
  // Walking every open connection made the crowded poll hundreds of times the lone one; a loaded machine's noise
  // is well under the bound.
  assert.ok(crowded < 5 * alone + 2 * POLLS, `a poll beside 10,000 others: ${perPoll(crowded)}, alone ${perPoll(alone)}`);
  for (const c of [...others, ...mine]) c.end({ result: 'ok' });
  assert.equal(log.openUsers, 0);
});
