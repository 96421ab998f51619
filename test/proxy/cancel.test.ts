// DialCancel keeps its first listener in a field and the others in a list: abort still runs each listener once,
// in the order added, whatever was removed before.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DialCancel } from '../../src/proxy/cancel.ts';

test('abort runs the listeners still added, once each, in the order added', () => {
  const calls: string[] = [];
  const fn = (name: string) => () => calls.push(name);
  const a = fn('a');
  const b = { handleEvent: () => calls.push('b') };
  const c = fn('c');
  const d = fn('d');
  const cancel = new DialCancel();
  cancel.addEventListener('abort', a);
  cancel.addEventListener('abort', b);
  cancel.removeEventListener('abort', a);
  // Added after b: runs after it, though the first place is free.
  cancel.addEventListener('abort', c);
  cancel.addEventListener('abort', d);
  cancel.removeEventListener('abort', d);
  const destroyed: boolean[] = [];
  cancel.socket = { destroy: () => destroyed.push(true) };
  cancel.abort();
  cancel.abort();
  assert.deepEqual(calls, ['b', 'c']);
  assert.deepEqual(destroyed, [true]);
  assert.equal(cancel.socket, null);
  // Too late: never called.
  cancel.addEventListener('abort', a);
  assert.deepEqual(calls, ['b', 'c']);
});

test('a single listener removed is not called; one added after it is', () => {
  const calls: string[] = [];
  const cancel = new DialCancel();
  const a = () => calls.push('a');
  cancel.addEventListener('abort', a);
  cancel.removeEventListener('abort', a);
  cancel.addEventListener('abort', () => calls.push('b'));
  cancel.abort();
  assert.deepEqual(calls, ['b']);
});
