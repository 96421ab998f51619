// Preloaded into a gateway by bench/counts.ts (node --import): counts, from the process's start, the async
// resources it creates by type (promises, timers, immediates, sockets, …), the listeners added to and removed
// from its sockets by event, and process.nextTick calls; writes them to ROTOR_COUNTS_FILE every 100 ms.
// Counting promises through an async hook makes V8 create the promises its await fast path would skip, so
// PROMISE is an upper bound; the other counts are exact.
import { createHook } from 'node:async_hooks';
import { writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { Readable } from 'node:stream';

const file = process.env.ROTOR_COUNTS_FILE;
if (file) {
  const counts = Object.create(null);
  const inc = (k) => {
    counts[k] = (counts[k] ?? 0) + 1;
  };
  createHook({ init: (_id, type) => inc(`async ${type}`) }).enable();
  // Readable.prototype's on/removeListener are what a socket's calls reach (EventEmitter's are called from them).
  const wrap = (name, label) => {
    const f = Readable.prototype[name];
    Readable.prototype[name] = function (ev, fn) {
      if (this instanceof Socket) inc(`${label} ${String(ev)}`);
      return f.call(this, ev, fn);
    };
  };
  wrap('on', 'listener+');
  wrap('addListener', 'listener+');
  wrap('removeListener', 'listener-');
  wrap('off', 'listener-');
  const nextTick = process.nextTick;
  process.nextTick = function (...args) {
    inc('nextTick');
    return nextTick.apply(this, args);
  };
  const write = () => {
    try {
      writeFileSync(file, JSON.stringify(counts));
    } catch {
      // the bench reads the last good write
    }
  };
  setInterval(write, 100).unref();
}
