// Preloaded into a gateway by bench/counts.ts (node --import): counts, from the process's start, the async
// resources it creates by type (promises, timers, immediates, sockets, …), the listeners added to and removed
// from its sockets by event, process.nextTick calls, and calls of what a CPU profile shows on the tunnel's
// path: clocks (Date.now, performance.now, process.hrtime), timers (setTimeout, refresh, a socket's
// setTimeout), queueMicrotask, Buffer allocation, events emitted on sockets, and a socket's stream
// transitions (pause, resume, cork, uncork, end, destroy, setNoDelay); writes them to ROTOR_COUNTS_FILE every
// 100 ms.
// Counting promises through an async hook makes V8 create the promises its await fast path would skip, so
// PROMISE is an upper bound; the other counts are exact.
import { createHook } from 'node:async_hooks';
import { writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';

const file = process.env.ROTOR_COUNTS_FILE;
if (file) {
  const counts = Object.create(null);
  const inc = (k) => {
    counts[k] = (counts[k] ?? 0) + 1;
  };
  // ROTOR_COUNTS_SITES=1 (bench/counts.ts --promise-sites): each promise also counted by where it was made, its
  // first two frames outside node's own modules (a stack per promise: counts only, never a CPU figure).
  const sites = process.env.ROTOR_COUNTS_SITES === '1';
  const site = () => {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 30;
    const stack = new Error().stack ?? '';
    Error.stackTraceLimit = limit;
    return (
      stack
        .split('\n')
        .slice(1)
        .map((l) => l.trim().replace(/^at /, ''))
        .filter((l) => !l.includes('node:') && !l.includes('counts-preload.mjs'))
        .slice(0, 2)
        .map((l) => l.replace(/\(?(?:file:\/\/)?\/\S*?\/(dist|bench|src|node_modules)\//, '($1/'))
        .join(' <- ') || '(node)'
    );
  };
  createHook({
    init: (_id, type) => {
      inc(`async ${type}`);
      if (sites && type === 'PROMISE') inc(`promise at ${site()}`);
    },
  }).enable();
  // Readable.prototype's on/removeListener are what a socket's calls reach (EventEmitter's are called from them).
  const wrap = (name, label) => {
    const f = Readable.prototype[name];
    Readable.prototype[name] = function (ev, fn) {
      if (this instanceof Socket) {
        inc(`${label} ${String(ev)}`);
        if (process.env.ROTOR_COUNTS_SIDES === '1') inc(`${label} ${String(ev)} ${this.server ? 'client' : 'upstream'}`);
      }
      return f.call(this, ev, fn);
    };
  };
  wrap('on', 'listener+');
  wrap('addListener', 'listener+');
  wrap('removeListener', 'listener-');
  wrap('off', 'listener-');
  /** Counts the calls of obj[name] as `label` (only when `when(this)`, if given). */
  const count = (obj, name, label, when) => {
    const f = obj[name];
    if (typeof f !== 'function') return;
    obj[name] = function (...args) {
      if (when === undefined || when(this)) inc(label);
      return f.apply(this, args);
    };
  };
  count(Date, 'now', 'call Date.now');
  count(performance, 'now', 'call performance.now');
  count(process.hrtime, 'bigint', 'call process.hrtime.bigint');
  const { bigint } = process.hrtime;
  count(process, 'hrtime', 'call process.hrtime');
  process.hrtime.bigint = bigint;
  count(globalThis, 'setTimeout', 'call setTimeout');
  count(globalThis, 'clearTimeout', 'call clearTimeout');
  count(globalThis, 'setImmediate', 'call setImmediate');
  count(globalThis, 'queueMicrotask', 'call queueMicrotask');
  const timeout = setTimeout(() => {}, 1);
  count(Object.getPrototypeOf(timeout), 'refresh', 'call Timeout.refresh');
  clearTimeout(timeout);
  for (const name of ['alloc', 'allocUnsafe', 'allocUnsafeSlow', 'from', 'concat']) count(Buffer, name, `call Buffer.${name}`);
  for (const name of ['setTimeout', 'pause', 'resume', 'cork', 'uncork', 'end', 'destroy', 'setNoDelay', 'setKeepAlive', 'read'])
    count(Socket.prototype, name, `socket.${name}`);
  // The same transitions by side (a socket a server accepted is a client's, any other an upstream's) and node's
  // own _read: "starts reading" when it reaches the handle (readStart, or a wait for 'connect'), else a no-op.
  const side = (s) => (s.server ? 'client' : 'upstream');
  for (const name of ['pause', 'resume', 'read']) {
    const f = Socket.prototype[name];
    Socket.prototype[name] = function (...args) {
      inc(`socket.${name} ${side(this)}${name === 'read' && args[0] === 0 ? ' (0)' : ''}`);
      if (process.env.ROTOR_COUNTS_TRACE === name) inc(`${name} ${side(this)} at ${site()}`);
      return f.apply(this, args);
    };
  }
  const _read = Socket.prototype._read;
  Socket.prototype._read = function (n) {
    const starts = this.connecting || !this._handle || !this._handle.reading;
    inc(`socket._read ${side(this)}${starts ? ' starts reading' : ''}`);
    return _read.call(this, n);
  };
  const emit = Socket.prototype.emit;
  Socket.prototype.emit = function (ev, ...args) {
    inc(`socket emit ${String(ev)}`);
    return emit.call(this, ev, ...args);
  };
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
