// The reload's order and truth: one reload at a time in the order asked, a failed step tried again, then reported
// as applied in part (never as kept), and the changed settings a reload does not apply named.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/index.ts';
import type { Config } from '../../src/config/schema.ts';
import { ReloadIncompleteError, serialReloader, settingsNeedingRestart, type ReloadStep } from '../../src/daemon/reload.ts';

const base = parseConfig({ platform: { mode: 'embedded' } }, { env: {} });
const withPort = (port: number): Config => ({ ...base, admin: { ...base.admin, port } });

test('reloads asked at once run one after another, in the order asked', async () => {
  const log: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const reload = serialReloader({
    async prepare(next) {
      const id = String(next.admin.port);
      log.push(`prepare ${id}`);
      return [
        {
          name: 'slow',
          run: async () => {
            if (id === '1') await gate;
            log.push(`apply ${id}`);
          },
        },
      ];
    },
  });
  const first = reload(withPort(1));
  const second = reload(withPort(2));
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(log, ['prepare 1'], 'the second reload began before the first ended');
  release();
  await Promise.all([first, second]);
  assert.deepEqual(log, ['prepare 1', 'apply 1', 'prepare 2', 'apply 2']);
});

test('a refused reload (prepare throws) runs no step, and the next reload still runs', async () => {
  const ran: string[] = [];
  const reload = serialReloader({
    async prepare(next) {
      if (next.admin.port === 1) throw new Error('unreadable caFile');
      return [{ name: 'a', run: () => void ran.push('a') }];
    },
  });
  await assert.rejects(reload(withPort(1)), /unreadable caFile/);
  assert.deepEqual(ran, []);
  await reload(withPort(2));
  assert.deepEqual(ran, ['a']);
});

test('a step that fails is tried again; one that keeps failing ends the reload as applied in part, naming it', async () => {
  const waits: number[] = [];
  let tries = 0;
  const ran: string[] = [];
  const steps = (failures: number): ReloadStep[] => [
    { name: 'users', run: () => void ran.push('users') },
    {
      name: 'accounts',
      run: () => {
        tries++;
        if (tries <= failures) throw new Error('store unavailable');
        ran.push('accounts');
      },
    },
    { name: 'done', run: () => void ran.push('done') },
  ];
  let failures = 2;
  const reload = serialReloader({
    prepare: async () => steps(failures),
    retryDelaysMs: [10, 20],
    sleep: async (ms) => void waits.push(ms),
  });
  await reload(base);
  assert.deepEqual(ran, ['users', 'accounts', 'done'], 'two failures, then the step and the rest ran');
  assert.deepEqual(waits, [10, 20]);

  ran.length = 0;
  tries = 0;
  failures = 5;
  const err = await reload(base).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof ReloadIncompleteError, `${String(err)}`);
  assert.equal(err.step, 'accounts');
  assert.equal(err.code, 'CONFIG_RELOAD_INCOMPLETE');
  assert.match(err.message, /applied in part/);
  assert.deepEqual(ran, ['users'], 'the steps after the failing one ran');
});

test('changed settings a reload does not apply are named, those it applies are not, values never', () => {
  const next: Config = {
    ...base,
    admin: { ...base.admin, token: 'secret-new-token' },
    proxy: { ...base.proxy, drainMs: base.proxy.drainMs + 1, rules: { ...base.proxy.rules } },
    users: [{ ...({} as Config['users'][number]), name: 'x' } as Config['users'][number]],
  };
  const keys = settingsNeedingRestart(base, next);
  assert.deepEqual(keys.sort(), ['admin.token', 'proxy.drainMs']);
  assert.ok(!JSON.stringify(keys).includes('secret-new-token'));
  assert.deepEqual(settingsNeedingRestart(base, base), []);
});
