// The portal's wrong-password back-off against guesses sent at once (README "Customer portal": after
// portal.login.freeFailures (3) wrong passwords for a user name each next try waits "and is refused unchecked
// meanwhile"). A try is reserved before its password's scrypt: the checks in flight count against the name and
// the address, so a burst of any size checks at most the free failures and the rest are refused unchecked (429
// LOGIN_DELAYED), the right password among them too. Counting a failure only after its check let every guess of
// a burst through (39 of 40 checked, the right one signed in). Real daemon on the embedded sandbox, real HTTP.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request, type IncomingHttpHeaders } from 'node:http';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { poll } from '../support/wait.ts';

const VICTIM = { user: 'victim1', password: 'victim-pass-1234' };
const CHANGER = { user: 'changer1', password: 'changer-pass-1234' };
let gw: Gateway;
let base: string;

before(async () => {
  gw = await startGateway();
  base = gw.config.portal.path;
  for (const u of [VICTIM, CHANGER]) {
    const r = await gw.admin('/v1/users', { body: { name: u.user, mainAccount: 'shop1', password: u.password } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
});
after(async () => {
  await gw?.close();
});

/** One POST to the portal's API from the local address `from` (each test its own: the address has a count too). */
const post = (
  path: string,
  body: unknown,
  from: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> =>
  new Promise((resolve, reject) => {
    const url = new URL(`${gw.adminUrl}${base}api/${path}`);
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        localAddress: from,
        agent: false,
        headers: { 'content-type': 'application/json', ...headers },
        timeout: 60_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer within 60 s')));
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
const login = async (user: string, password: string, from = '127.0.0.1'): Promise<number> =>
  (await post('login', { user, password }, from)).status;

test('a burst of 40 guesses sent at once: at most the free failures are checked, the right one among them is held back', async () => {
  const guesses = Array.from({ length: 39 }, (_, i) => `guess-${i}`);
  guesses.push(VICTIM.password); // the attacker's 40th guess happens to be right
  const statuses = await Promise.all(guesses.map((g) => login(VICTIM.user, g)));
  const checked = statuses.filter((s) => s === 401).length;
  const held = statuses.filter((s) => s === 429).length;
  const signedIn = statuses[39] === 204;
  assert.ok(
    checked <= 3 && !signedIn && checked + held === 40,
    `of 40 guesses at once ${checked} were checked (401), ${held} held back (429); the right one signed in: ${signedIn}`,
  );
  // The reservations were all given back: once the wait is over the customer signs in (one try at a time).
  await poll(async () => (await login(VICTIM.user, VICTIM.password)) === 204, {
    what: 'the right password accepted after the wait',
    timeoutMs: 20_000,
    everyMs: 250,
  });
});

test('the password change: a burst of wrong current passwords checks at most the free failures, the right one is held back', async () => {
  const from = '127.0.0.2';
  const signIn = await post('login', { user: CHANGER.user, password: CHANGER.password }, from);
  assert.equal(signIn.status, 204);
  const cookie = /^(rotor_portal=[A-Za-z0-9_-]+)/.exec(signIn.headers['set-cookie']?.[0] ?? '')![1]!;
  const headers = { cookie, 'x-rotor-csrf': String(signIn.headers['x-rotor-csrf']) };
  const currents = Array.from({ length: 19 }, (_, i) => `wrong-current-${i}`);
  currents.push(CHANGER.password);
  const answers = await Promise.all(currents.map((current) => post('password', { current, password: 'a-new-password-1' }, from, headers)));
  const statuses = answers.map((a) => a.status);
  const checked = statuses.filter((s) => s === 401).length;
  const held = answers.filter((a) => a.status === 429 && a.headers['retry-after'] !== undefined).length;
  assert.ok(
    checked <= 3 && statuses[19] !== 204 && checked + held === 20,
    `of 20 password changes at once ${checked} were checked (401), ${held} held back (429 with retry-after): ${JSON.stringify(statuses)}`,
  );
  const codes = answers.filter((a) => a.status === 429).map((a) => (JSON.parse(a.body) as { error: { code: string } }).error.code);
  assert.ok(
    codes.every((c) => c === 'LOGIN_DELAYED'),
    JSON.stringify(codes),
  );
});

test("unauthenticated portal sign-ins do not hold the admin API's password writes behind them; beyond the queue's bound they are shed", async () => {
  // 300 sign-ins for names nobody has (each costs a scrypt on the process's hash queue), from 30 addresses (10
  // each, under an address's bound), then the reseller creates a user with a password: its hash must not wait
  // for them. Before, they ran at the 'admin' priority, never shed: the write waited behind all of them.
  let checkedSoFar = 0;
  const answers: { status: number; headers: IncomingHttpHeaders; body: string }[] = [];
  const flood = Array.from({ length: 300 }, (_, i) =>
    post('login', { user: `nobody${i}`, password: 'x' }, `127.0.1.${1 + (i % 30)}`).then((a) => {
      answers.push(a);
      if (a.status === 401) checkedSoFar++;
    }),
  );
  // The queue filled: the first sign-in answered (the shed ones are answered at once, checked ones after a hash).
  await poll(() => answers.length > 0, { what: 'the first anonymous sign-in answered', timeoutMs: 30_000, everyMs: 5 });
  const atSend = checkedSoFar;
  const sentAt = Date.now();
  const r = await gw.admin('/v1/users', { body: { name: 'newcust1', mainAccount: 'shop1', password: 'newcust1-pass-99' } });
  const took = Date.now() - sentAt;
  const during = checkedSoFar - atSend;
  await Promise.all(flood);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const checked = answers.filter((a) => a.status === 401).length;
  const shed = answers.filter((a) => a.status === 503);
  assert.ok(
    during < 20,
    `POST /v1/users took ${took} ms: ${during} of the ${checked - atSend} anonymous portal sign-ins checked after it was sent were checked before its answer`,
  );
  // Bounded: at most the queue's bound (proxy.auth.maxQueuedHashes, 64) waits; the others are shed, unchecked.
  assert.ok(shed.length > 0 && checked + shed.length === 300, `answers: ${checked} checked (401), ${shed.length} shed (503) of 300`);
  for (const a of shed) {
    assert.equal((JSON.parse(a.body) as { error: { code: string } }).error.code, 'AUTH_BUSY');
    assert.equal(a.headers['retry-after'], '1');
  }
  // Shed sign-ins are not failures: every address may still sign in (no 429 for them afterwards).
  const after = await login('newcust1', 'newcust1-pass-99', '127.0.1.1');
  assert.equal(after, 204, 'a customer behind a flooding address signs in once the flood is over');
});

test('an office behind one NAT: 20 customers signing in at once with their right passwords all get in (none refused 429)', async () => {
  // One address, 20 names: past the address's 12 checks in flight the others wait in its line for a check to
  // end, and a right password ends without spending the address's count. Before, the 13th to the 20th were
  // refused 429 LOGIN_DELAYED however right their passwords.
  const staff = Array.from({ length: 20 }, (_, i) => ({ user: `office${i}`, password: `office-pass-${i}-5678` }));
  for (const u of staff) {
    const r = await gw.admin('/v1/users', { body: { name: u.user, mainAccount: 'shop1', password: u.password } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  const statuses = await Promise.all(staff.map((u) => login(u.user, u.password, '127.0.0.3')));
  assert.deepEqual(statuses, Array(20).fill(204), JSON.stringify(statuses));
});

test('one address guessing 40 names at once: at most its 12 free failures are checked, the others refused unchecked', async () => {
  // The line must not let a burst over many names through: once the checks in flight spent the address's free
  // failures its wait starts and every try in line is refused with it. The 40th guess is a right password.
  const names = Array.from({ length: 39 }, (_, i) => ({ user: `sprayed${i}`, password: 'Summer2026!' }));
  names.push({ user: 'office0', password: 'office-pass-0-5678' });
  const statuses = await Promise.all(names.map((n) => login(n.user, n.password, '127.0.0.4')));
  const checked = statuses.filter((s) => s === 401 || s === 204).length;
  const held = statuses.filter((s) => s === 429).length;
  assert.ok(
    checked <= 12 && checked + held === 40,
    `of 40 guesses at once ${checked} were checked, ${held} held back: ${JSON.stringify(statuses)}`,
  );
});
