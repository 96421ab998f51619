// The guard between accounts and the pool: it is what is tested here, so its collaborators are small
// in-test objects that record what the guard asked of them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DrawRefusedError, guardDrawer } from '../../src/accounts/draw-guard.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';

const NODE: UpstreamNode = { id: 'socks5://u@127.0.0.1:1080', protocol: 'socks5', host: '127.0.0.1', port: 1080, source: 'pwd' };

function setup(opts: { canDraw: boolean; fail?: Error }) {
  const calls: string[] = [];
  const inner = {
    draw: async (n: number) => {
      calls.push(`draw ${n}`);
      if (opts.fail) throw opts.fail;
      return [NODE];
    },
  };
  const deps = {
    whitelist: { ensure: async (a: string, p: string) => void calls.push(`ensure ${a}/${p}`) },
    balances: {
      canDraw: (a: string, p: string) => (calls.push(`canDraw ${a}/${p}`), opts.canDraw),
      drawFailed: (err: unknown) => void calls.push(`drawFailed ${(err as Error).message}`),
    },
  };
  return { calls, inner, deps };
}

test('an empty balance refuses the draw without asking the platform', async () => {
  const { calls, inner, deps } = setup({ canDraw: false });
  const guarded = guardDrawer(inner, { mainAccount: 'shop1', draw: 'pwd' }, 'P1', deps);
  await assert.rejects(guarded.draw(3), (err: unknown) => err instanceof DrawRefusedError && /shop1 for P1 is exhausted/.test(err.message));
  assert.deepEqual(calls, ['canDraw shop1/P1']);
});

test('an API user is whitelisted before it draws; a password user is not', async () => {
  const api = setup({ canDraw: true });
  assert.deepEqual(await guardDrawer(api.inner, { mainAccount: 'shop1', draw: 'api' }, 'P1', api.deps).draw(2), [NODE]);
  assert.deepEqual(api.calls, ['canDraw shop1/P1', 'ensure shop1/P1', 'draw 2']);
  const pwd = setup({ canDraw: true });
  await guardDrawer(pwd.inner, { mainAccount: 'shop1', draw: 'pwd' }, 'P1', pwd.deps).draw(2);
  assert.deepEqual(pwd.calls, ['canDraw shop1/P1', 'draw 2']);
});

test('a failed draw is shown to the balance watcher and still fails', async () => {
  const { calls, inner, deps } = setup({ canDraw: true, fail: new Error('insufficient balance') });
  await assert.rejects(guardDrawer(inner, { mainAccount: 'shop1', draw: 'pwd' }, 'P1', deps).draw(1), /insufficient balance/);
  assert.deepEqual(calls, ['canDraw shop1/P1', 'draw 1', 'drawFailed insufficient balance']);
});
