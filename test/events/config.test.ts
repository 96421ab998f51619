// The events config: a webhook needs a secret, the URL must be http(s), and the secret (and any password in
// the URL) never appears in the effective config Rotor prints (check-config) or logs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig, redactConfig } from '../../src/config/index.ts';

test('events.webhookUrl needs events.secret and an http(s) URL; both are redacted', () => {
  assert.throws(() => parseConfig({ events: { webhookUrl: 'https://hooks.test/x' } }, { env: {} }), /events\.secret/);
  assert.throws(() => parseConfig({ events: { webhookUrl: 'ftp://hooks.test/x', secret: 's' } }, { env: {} }), /events\.webhookUrl/);
  const config = parseConfig({ events: { webhookUrl: 'https://me:pw-in-url@hooks.test/x', secret: 'hook-secret-value' } }, { env: {} });
  assert.equal(config.events.checkMs, 1000);
  const shown = JSON.stringify(redactConfig(config));
  assert.ok(!shown.includes('hook-secret-value'));
  assert.ok(!shown.includes('pw-in-url'));
  assert.match(shown, /"secret":"\*\*\*"/);
  const fromEnv = parseConfig({}, { env: { ROTOR_EVENTS_WEBHOOK_URL: 'http://127.0.0.1:9/h', ROTOR_EVENTS_SECRET: 'env-secret' } });
  assert.equal(fromEnv.events.webhookUrl, 'http://127.0.0.1:9/h');
  assert.equal(fromEnv.events.secret, 'env-secret');
});

test('users may carry rules and listen; proxy.rules defaults to denying port 25', () => {
  const config = parseConfig(
    {
      users: [
        {
          name: 'u1',
          password: 'p',
          mainAccount: 'm',
          rules: { denyHosts: ['*.x.test'] },
          listen: { port: 0, allowIps: ['127.0.0.1/32'] },
        },
      ],
    },
    { env: {} },
  );
  assert.deepEqual(config.proxy.rules.denyPorts, [25]);
  assert.deepEqual(config.users[0]!.rules?.denyHosts, ['*.x.test']);
  assert.deepEqual(config.users[0]!.listen, { port: 0, allowIps: ['127.0.0.1/32'] });
  assert.throws(
    () => parseConfig({ users: [{ name: 'u1', password: 'p', mainAccount: 'm', listen: { port: 1, allowIps: ['nope'] } }] }, { env: {} }),
    /users\.0\.listen\.allowIps\.0/,
  );
  assert.throws(() => parseConfig({ proxy: { rules: { denyHosts: ['bad host'] } } }, { env: {} }), /proxy\.rules\.denyHosts\.0/);
  const twice = { port: 18080, allowIps: [] };
  assert.throws(
    () =>
      parseConfig(
        {
          users: [
            { name: 'a', password: 'p', mainAccount: 'm', listen: twice },
            { name: 'b', password: 'p', mainAccount: 'm', listen: twice },
          ],
        },
        { env: {} },
      ),
    /users\.1\.listen\.port: port 18080 is already a's/,
  );
});
