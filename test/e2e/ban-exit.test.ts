// A ban a request rule makes names the exit the connection left from, as the connection's record does (and as the
// target saw it), not the upstream node's gateway host: GET /v1/bans `exit` and the dashboard's exit column say
// what the operator looks for in the records.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startHttpTarget, type HttpTarget } from '../support/target.ts';
import { poll } from '../support/wait.ts';
import { curl, startGateway, viaHttp, type Gateway } from './harness.ts';

const TOKEN = 'ban-exit-token';
let gw: Gateway;
let target: HttpTarget;

before(async () => {
  gw = await startGateway({ config: { admin: { token: TOKEN } } });
  target = await startHttpTarget();
  const made = await gw.admin('/v1/users', {
    body: {
      name: 'banexit',
      password: 'banexit-pass-1',
      mainAccount: 'shop1',
      requestRules: [{ name: 'any-ok', status: [200], action: 'ban', banSeconds: 600 }],
    },
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
});
after(async () => {
  await target?.close();
  await gw?.close();
});

type Ban = { user: string; node: string; exit: string; rule: string };
type ConnectionRecord = { exit?: string | null; rule?: string | null };

test("a plain-HTTP request's ban names the exit its record names and the target saw", async () => {
  const r = await curl([...viaHttp(gw.ports.http, 'banexit', 'banexit-pass-1'), target.url('/ip')], { maxTimeS: 20 });
  assert.equal(r.exitCode, 0, r.stderr);
  const seen = r.body.trim();
  const record = await poll(
    async () => (await gw.admin<{ items: ConnectionRecord[] }>('/v1/connections?user=banexit&limit=5')).body.items[0],
    { timeoutMs: 5000, what: "banexit's record" },
  );
  assert.equal(record.rule, 'any-ok');
  assert.equal(record.exit, seen, 'the record names the address the target saw');
  const bans = (await gw.admin<Ban[]>('/v1/bans?user=banexit')).body;
  assert.equal(bans.length, 1, JSON.stringify(bans));
  assert.equal(bans[0]!.exit, seen, `the ban's exit (node ${bans[0]!.node})`);
});
