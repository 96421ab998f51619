// A customer's verified login is kept per user, not per user name in one LRU shared by every customer
// (src/proxy/auth-check.ts): another customer's valid logins under any number of names (here `-region-<junk>`
// names, each refused 403 after the login) must not push it out. That kept login is what lets a customer in
// while its name is blocked by someone else's wrong guesses (proxy.auth.userFailures); before, 310 such logins
// evicted the victim's pair and the victim was answered 407 for blockMs. proxy.auth.cacheSize 300 is the old
// LRU's size (the default 10,000 needs as many requests). Real daemon on the embedded sandbox, raw CONNECTs.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, startTarget, type Gateway, type Target } from './harness.ts';
import { connectStatus } from '../support/connect-head.ts';

const CACHE = 300;
let gw: Gateway;
let target: Target;
before(async () => {
  gw = await startGateway({
    config: {
      proxy: { auth: { cacheSize: CACHE, userFailures: 20, failureDelayMs: 0 } },
      users: [
        { name: 'victim', password: 'victim-pass', mainAccount: 'shop1' },
        { name: 'mallory', password: 'mallory-pass', mainAccount: 'shop1' },
      ],
    },
  });
  target = await startTarget();
});
after(async () => {
  await target?.close();
  await gw?.close();
});

const status = (user: string, pass: string) => connectStatus(gw.ports.http, target.port, user, pass);

test("one customer's own valid logins evict another's verified pair: a blocked name then locks the victim out", async () => {
  assert.equal(await status('victim', 'victim-pass'), 200, 'the victim is served (its pair verified and kept)');
  assert.equal(await status('mallory', 'mallory-pass'), 200, 'the other customer is served too (its pair verified)');
  for (let i = 0; i < 20; i++) assert.equal(await status('victim', `guess${i}`), 407); // anyone's wrong guesses block the name
  assert.equal(await status('victim', 'victim-pass'), 200, 'the victim keeps working while its name is blocked (its pair is cached)');
  assert.equal(await status('victim', 'guess-more'), 407);
  const blocked = await gw.metric('rotor_auth_failures_total', { reason: 'blocked_user' });
  const blockedSource = await gw.metric('rotor_auth_failures_total', { reason: 'blocked_source' });
  assert.ok(blocked + blockedSource > 0, `the victim's name is blocked (blocked_user ${blocked}, blocked_source ${blockedSource})`);
  for (let i = 0; i < CACHE + 10; i++) await status(`mallory-region-ZZ${i}`, 'mallory-pass'); // 403 each, cached each
  const after = await status('victim', 'victim-pass');
  assert.equal(after, 200, `after another customer's ${CACHE + 10} logins the victim is answered ${after}`);
  assert.equal(await status('victim-session-s1', 'victim-pass'), 200, 'with options too, while its name is still blocked');
  assert.equal(await status('victim', 'guess-again'), 407, 'the name is still blocked for anything else');
});
