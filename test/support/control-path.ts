// The chain of modules that hold and hand on a connection's control, and where it climbs: measured on a real
// daemon in this process over real sockets. A worker thread attaches to this thread's inspector and pauses it
// at two probes — where the upstream dial begins and where the relay (or the plain-HTTP answer) starts — and
// records the stack there: the synchronous frames and the asynchronous parents V8 and node keep across awaits,
// promise reactions and socket events (Debugger.setAsyncCallStackDepth). Each stack, outermost first, reduced
// to the modules of src/ (the sandbox's left out) with repeats merged, is a chain of calls: every step is a
// call from one module into the next. The two chains share their start (accept, login, admission); the path is
// the dial's chain followed by what the relay's adds after the part they share. A climb is a step into a module
// above the caller: its folder reaches the caller's in the import graph and not the other way round, or, in one
// folder, the callee's file imports the caller's (directly or not). The import graph is read from the checkout
// measured, so an older commit is judged by its own imports. Used by bench/path-modules.ts (docs/architecture.md
// "As it runs") and test/architecture/paths.test.ts. A second mode puts a breakpoint on every function of src/
// the connection runs (found by V8's precise coverage on a first run) and records the stack at each call: every
// call from one module into another, the modules that hand control on, and the calls that climb.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { startGateway } from '../e2e/harness.ts';
import { startHttpTarget } from './target.ts';
import { httpGet, socks5Get } from './path-clients.ts';
import { parseDependencyRule } from '../architecture/declared-order.ts';

/** Where to pause: a module (a path under src/, or a node module such as `node:_http_server`) and the line a regex finds in its code. */
export interface Probe {
  name: string;
  module: string;
  /** Matched against the code V8 runs (tsx's output for src/); the breakpoint goes on the line after the match. */
  pattern: RegExp;
}

export interface ControlPath {
  /** Per probe, the chain of modules (paths under src/), outermost first. */
  chains: Record<string, string[]>;
  /** The dial's chain, then what the relay's adds after the part they share. */
  path: string[];
  modules: number;
  /** Each step into a module above its caller: `caller → callee`. */
  climbs: string[];
}

/** Every call between modules while one connection ran (each function of src/ it ran, paused at). */
export interface ControlCalls {
  /** Each call from one module into another: `caller → callee`. */
  steps: string[];
  /** Every module control entered. */
  modules: string[];
  /** The modules that handed control on: called into another module (leaf helpers that only return are not). */
  handing: string[];
  climbs: string[];
}

export const DEFAULT_PROBES: Probe[] = [
  { name: 'dial', module: 'proxy/upstream-dial.ts', pattern: /function dialThrough\s*[(<]/ },
  { name: 'relay', module: 'proxy/relay.ts', pattern: /function relay\s*\(/ },
];
export const HTTP_PROBES: Probe[] = [
  { name: 'dial', module: 'proxy/upstream-dial.ts', pattern: /function dialThrough\s*[(<]/ },
  { name: 'answer', module: 'node:_http_server', pattern: /^function writeHead\s*\(/m },
];

// The worker: attached to the main thread's inspector; arms breakpoints on request, records a stack at each
// pause (then resumes at once), disarms on request.
const WORKER = `
const { parentPort } = require('node:worker_threads');
const { Session } = require('node:inspector');
const session = new Session();
session.connectToMainThread();
const post = (method, params = {}) => new Promise((ok, fail) => session.post(method, params, (e, r) => (e ? fail(e) : ok(r))));
const scripts = new Map();
session.on('Debugger.scriptParsed', (m) => scripts.set(m.params.scriptId, m.params.url));
let armed = new Map();
session.on('Debugger.paused', (m) => {
  const p = m.params;
  const frames = [];
  for (const f of p.callFrames) frames.push(f.url || scripts.get(f.location.scriptId) || '');
  for (let a = p.asyncStackTrace; a; a = a.parent) {
    frames.push('@' + (a.description || ''));
    for (const f of a.callFrames) frames.push(f.url || scripts.get(f.scriptId) || '');
  }
  const probes = (p.hitBreakpoints || []).map((id) => armed.get(id)).filter(Boolean);
  session.post('Debugger.resume');
  if (probes.length > 0) parentPort.postMessage({ type: 'stack', probes, frames });
});
parentPort.on('message', async (msg) => {
  try {
    if (msg.type === 'start') {
      await post('Debugger.enable');
      await post('Debugger.setAsyncCallStackDepth', { maxDepth: 128 });
      parentPort.postMessage({ type: 'ok' });
    } else if (msg.type === 'arm') {
      for (const probe of msg.probes) {
        const found = [...scripts].filter(([, url]) => url === probe.url || url.startsWith(probe.url + '?'));
        if (found.length === 0) throw new Error('probe ' + probe.name + ': no script ' + probe.url);
        let placed = false;
        for (const [scriptId] of found) {
          const { scriptSource } = await post('Debugger.getScriptSource', { scriptId });
          const re = new RegExp(probe.pattern, probe.flags);
          const at = scriptSource.search(re);
          if (at < 0) continue;
          // Inside the function's body: just after the first '{' that follows the match (tsx's output may be one line).
          const body = scriptSource.indexOf('{', at) + 1;
          const before = scriptSource.slice(0, body);
          const line = before.split('\\n').length - 1;
          const column = body - (before.lastIndexOf('\\n') + 1);
          const r = await post('Debugger.setBreakpoint', { location: { scriptId, lineNumber: line, columnNumber: column } });
          armed.set(r.breakpointId, probe.name);
          placed = true;
        }
        if (!placed) throw new Error('probe ' + probe.name + ': ' + probe.pattern + ' not found in ' + probe.url);
      }
      parentPort.postMessage({ type: 'ok' });
    } else if (msg.type === 'coverage') {
      await post('Profiler.enable');
      await post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
      parentPort.postMessage({ type: 'ok' });
    } else if (msg.type === 'ran') {
      // Every function of the scripts under msg.prefix that ran since the last look gets a breakpoint at its
      // body's start: the next connection pauses at each call into them.
      const { result } = await post('Profiler.takePreciseCoverage');
      if (msg.arm) {
        for (const script of result) {
          if (!script.url.startsWith(msg.prefix) || msg.skip.some((x) => script.url.startsWith(x))) continue;
          let text;
          for (const f of script.functions) {
            const r0 = f.ranges[0];
            if (!r0 || r0.count === 0 || r0.startOffset === 0) continue;
            if (text === undefined) text = (await post('Debugger.getScriptSource', { scriptId: script.scriptId })).scriptSource;
            const brace = text.indexOf('{', r0.startOffset);
            const arrow = text.indexOf('=>', r0.startOffset);
            const at = arrow >= 0 && arrow < brace ? arrow + 2 : brace + 1;
            if (at <= 0 || at >= r0.endOffset) continue;
            const before = text.slice(0, at);
            const line = before.split('\\n').length - 1;
            const column = at - (before.lastIndexOf('\\n') + 1);
            try {
              const r = await post('Debugger.setBreakpoint', { location: { scriptId: script.scriptId, lineNumber: line, columnNumber: column } });
              armed.set(r.breakpointId, 'call');
            } catch {}
          }
        }
      }
      parentPort.postMessage({ type: 'ok' });
    } else if (msg.type === 'disarm') {
      for (const id of armed.keys()) await post('Debugger.removeBreakpoint', { breakpointId: id });
      armed = new Map();
      parentPort.postMessage({ type: 'ok' });
    } else if (msg.type === 'stop') {
      await post('Debugger.disable');
      session.disconnect();
      parentPort.postMessage({ type: 'ok' });
    }
  } catch (err) {
    parentPort.postMessage({ type: 'error', message: String(err && err.stack || err) });
  }
});
`;

export interface Stack {
  probes: string[];
  frames: string[];
}

class Pauser {
  private readonly worker = new Worker(WORKER, { eval: true });
  readonly stacks: Stack[] = [];
  private waiting: { ok: () => void; fail: (e: Error) => void } | undefined;

  constructor() {
    this.worker.on('message', (m: { type: string; message?: string } & Stack) => {
      if (m.type === 'stack') this.stacks.push({ probes: m.probes, frames: m.frames });
      else if (m.type === 'ok') this.waiting?.ok();
      else if (m.type === 'error') this.waiting?.fail(new Error(m.message));
    });
  }

  ask(msg: object): Promise<void> {
    return new Promise((ok, fail) => {
      this.waiting = { ok, fail };
      this.worker.postMessage(msg);
    });
  }

  async stop(): Promise<void> {
    await this.ask({ type: 'stop' });
    await this.worker.terminate();
  }
}

/** The files of src/ as module paths (`proxy/relay.ts`) with the src/ files each imports. */
export function importGraph(srcDir: string): Map<string, Set<string>> {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts')) files.push(p);
    }
  };
  walk(srcDir);
  const graph = new Map<string, Set<string>>();
  for (const f of files) {
    const deps = new Set<string>();
    const text = readFileSync(f, 'utf8');
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      deps.add(
        relative(srcDir, normalize(join(dirname(f), m[1]!)))
          .split('\\')
          .join('/'),
      );
    }
    graph.set(relative(srcDir, f).split('\\').join('/'), deps);
  }
  return graph;
}

const folderOf = (module: string): string => (module.includes('/') ? module.split('/')[0]! : module);

/**
 * The folder order a docs/architecture.md declares ("The dependency rule": its fenced block, top first), as each
 * folder's level; undefined when the document has none (an older checkout).
 */
export function declaredOrder(docPath: string): Map<string, number> | undefined {
  let doc: string;
  try {
    doc = readFileSync(docPath, 'utf8');
  } catch {
    return undefined;
  }
  const parsed = parseDependencyRule(doc);
  if (!parsed) return undefined;
  const levels = new Map<string, number>();
  parsed.forEach((names, level) => {
    for (const f of names) levels.set(f, level);
  });
  return levels;
}

/**
 * Whether a call from `caller` into `callee` climbs (see the top of this file). With a declared folder order,
 * folders are judged by it (the callee's folder above the caller's); without one, by the import graph.
 */
export function climbs(graph: Map<string, Set<string>>, caller: string, callee: string, order?: Map<string, number>): boolean {
  const reaches = (edges: Map<string, Set<string>>, from: string, to: string): boolean => {
    const seen = new Set<string>([from]);
    const todo = [from];
    while (todo.length > 0) {
      for (const next of edges.get(todo.pop()!) ?? []) {
        if (next === to) return true;
        if (!seen.has(next)) {
          seen.add(next);
          todo.push(next);
        }
      }
    }
    return false;
  };
  const a = folderOf(caller);
  const b = folderOf(callee);
  if (a !== b && order?.has(a) && order.has(b)) return order.get(b)! < order.get(a)!;
  if (a !== b) {
    const folders = new Map<string, Set<string>>();
    for (const [f, deps] of graph) {
      const s = folders.get(folderOf(f)) ?? new Set<string>();
      for (const d of deps) if (folderOf(d) !== folderOf(f)) s.add(folderOf(d));
      folders.set(folderOf(f), s);
    }
    const up = reaches(folders, b, a);
    const down = reaches(folders, a, b);
    if (up !== down) return up;
    // Folders in a cycle (or unrelated): judged by the files.
  }
  return reaches(graph, callee, caller) && !reaches(graph, caller, callee);
}

/** Async tasks (node's async resource types) whose parent is a listening socket's creation. */
const SERVER_TASKS = new Set(['@TCPSERVERWRAP', '@PIPESERVERWRAP']);

/**
 * Whether a stack is a task of an accepted connection: its chain reaches the listening socket, or it is an event
 * of an accepted socket itself. Node's inspector gives an accepted socket's own events (its reads, its close) no
 * parent task — its handle is made before any script runs — so their chain ends at a bare socket task; those of
 * an ignored folder's own servers (the sandbox's upstreams) are not the connection's.
 */
function connectionTask(frames: readonly string[], srcUrl: string, ignore: ReadonlySet<string>): boolean {
  if (frames.some((f) => SERVER_TASKS.has(f))) return true;
  // The oldest task of the chain (promise reactions and timers may follow it) is a socket's event that nothing of
  // src/ scheduled (a socket the daemon's own code opened has its dial's chain behind it).
  const oldest = frames.findLastIndex((f) => f.startsWith('@'));
  if (oldest < 0 || frames[oldest] !== '@TCPWRAP' || frames.slice(oldest).some((f) => f.startsWith(srcUrl))) return false;
  return !frames.some((f) => f.startsWith(srcUrl) && ignore.has(folderOf(f.slice(srcUrl.length).split('?')[0]!)));
}

/** A stack's frames (innermost first) as the chain of src/ modules, outermost first, repeats merged. */
/** Between two modules in a chain: an async boundary (an await's continuation, a promise reaction, an event), not a call. */
export const ASYNC = '⇢';

/**
 * A stack's frames (innermost first) as the chain of src/ modules, outermost first, repeats merged; ASYNC
 * where a task boundary separates two modules (the module before it scheduled the task, it did not call).
 */
function chainOf(frames: readonly string[], srcUrl: string, ignore: ReadonlySet<string>): string[] {
  // The connection starts at its accept: what is older (the listening socket's creation at the daemon's
  // start, the parent of every accepted socket's events) is not its path.
  let end = frames.findIndex((f) => SERVER_TASKS.has(f));
  if (end < 0) end = frames.length;
  const chain: string[] = [];
  let boundary = false;
  for (let i = end - 1; i >= 0; i--) {
    if (frames[i]!.startsWith('@')) {
      boundary = true;
      continue;
    }
    const url = frames[i]!.split('?')[0]!;
    if (!url.startsWith(srcUrl)) continue;
    const module = url.slice(srcUrl.length);
    if (ignore.has(folderOf(module))) continue;
    if (chain[chain.length - 1] !== module) {
      if (boundary && chain.length > 0) chain.push(ASYNC);
      chain.push(module);
    }
    boundary = false;
  }
  return chain;
}

/** The calls of a chain: consecutive modules with no task boundary between them. */
function callsOf(chain: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 1; i < chain.length; i++) if (chain[i] !== ASYNC && chain[i - 1] !== ASYNC) out.push([chain[i - 1]!, chain[i]!]);
  return out;
}

/**
 * Modules whose one job is to run the operation their caller hands them: the store's Redis connection
 * (RedisConnection.run(what, op) calls op with the client and maps its failures). Their call back into that
 * op is the caller's own step, not a climb. It runs in a connection's chain only for the connection log's
 * batched write, which the connection's close schedules (a timer, off the data path).
 */
const EXECUTORS = new Set(['store/redis-connection.ts']);

export function controlCalls(
  stacks: readonly Stack[],
  srcUrl: string,
  ignore: ReadonlySet<string>,
  graph: Map<string, Set<string>>,
  order?: Map<string, number>,
): ControlCalls {
  const steps = new Set<string>();
  const modules = new Set<string>();
  const handing = new Set<string>();
  for (const st of stacks) {
    if (!connectionTask(st.frames, srcUrl, ignore)) continue;
    const chain = chainOf(st.frames, srcUrl, ignore);
    for (const m of chain) if (m !== ASYNC) modules.add(m);
    for (const [a, b] of callsOf(chain)) {
      steps.add(`${a} → ${b}`);
      handing.add(a);
    }
  }
  const climbing = [...steps].filter((step) => {
    const [a, b] = step.split(' → ');
    return !EXECUTORS.has(a!) && climbs(graph, a!, b!, order);
  });
  return { steps: [...steps].sort(), modules: [...modules].sort(), handing: [...handing].sort(), climbs: climbing.sort() };
}

export function controlPath(
  chains: Record<string, string[]>,
  probes: readonly string[],
  graph: Map<string, Set<string>>,
  order?: Map<string, number>,
): ControlPath {
  const [first, second] = probes.map((n) => chains[n] ?? []);
  let shared = 0;
  while (shared < first!.length && shared < (second ?? []).length && first![shared] === second![shared]) shared++;
  const path = [...first!, ...(second ?? []).slice(shared)];
  const out = new Set<string>();
  for (const chain of [first!, second ?? []]) for (const [a, b] of callsOf(chain)) if (climbs(graph, a, b, order)) out.add(`${a} → ${b}`);
  return { chains, path, modules: new Set(path.filter((m) => m !== ASYNC)).size, climbs: [...out] };
}

export interface MeasureOptions {
  /** The checkout's src/ (whose modules are counted and whose imports judge the climbs). */
  srcDir: string;
  socks5Probes?: Probe[];
  httpProbes?: Probe[];
  /** Folders left out (the embedded sandbox). */
  ignore?: ReadonlySet<string>;
  /** Config overrides for the daemon (merged over the test harness's). */
  config?: Record<string, unknown>;
  /** The declared folder order that judges a call between folders (declaredOrder); absent: the import graph. */
  order?: Map<string, number>;
}

/** Runs one SOCKS5 connection and one plain-HTTP request (each a new client connection of a user already served) with the probes armed. */
export async function measureControl(
  options: MeasureOptions,
): Promise<{ socks5: ControlPath; http: ControlPath; socks5Calls: ControlCalls; httpCalls: ControlCalls }> {
  const srcUrl = pathToFileURL(options.srcDir.endsWith('/') ? options.srcDir : options.srcDir + '/').href;
  const ignore = options.ignore ?? new Set(['sim']);
  const graph = importGraph(options.srcDir);
  const pauser = new Pauser();
  await pauser.ask({ type: 'start' });
  await pauser.ask({ type: 'coverage' });
  const target = await startHttpTarget();
  const gw = await startGateway({ config: options.config ?? {} });
  const wire = (probes: Probe[]): object[] =>
    probes.map((p) => ({
      name: p.name,
      url: p.module.startsWith('node:') ? p.module : new URL(p.module, srcUrl).href,
      pattern: p.pattern.source,
      flags: p.pattern.flags,
    }));
  const run = async (probes: Probe[], one: () => Promise<void>): Promise<ControlPath> => {
    pauser.stacks.length = 0;
    await pauser.ask({ type: 'arm', probes: wire(probes) });
    try {
      await one();
    } finally {
      await pauser.ask({ type: 'disarm' });
    }
    const chains: Record<string, string[]> = {};
    for (const p of probes) {
      // The first stop of each probe in a task of an accepted connection that ran Rotor's code (not a daemon
      // timer's, such as a health probe's dial; not the sandbox's or the test's own).
      const s = pauser.stacks.find(
        (st) => st.probes.includes(p.name) && connectionTask(st.frames, srcUrl, ignore) && chainOf(st.frames, srcUrl, ignore).length > 0,
      );
      chains[p.name] = s ? chainOf(s.frames, srcUrl, ignore) : [];
    }
    return controlPath(
      chains,
      probes.map((p) => p.name),
      graph,
      options.order,
    );
  };
  try {
    await socks5Get(gw.ports.socks5, 'alice', 'alice-pass', target.port);
    await httpGet(gw.ports.http, 'bob', 'bob-pass', target.port);
    const socks5 = await run(options.socks5Probes ?? DEFAULT_PROBES, () => socks5Get(gw.ports.socks5, 'alice', 'alice-pass', target.port));
    const http = await run(options.httpProbes ?? HTTP_PROBES, () => httpGet(gw.ports.http, 'bob', 'bob-pass', target.port));
    const calls = async (one: () => Promise<void>): Promise<ControlCalls> => {
      const skip = [...ignore].map((f) => new URL(`${f}/`, srcUrl).href);
      await pauser.ask({ type: 'ran', arm: false, prefix: srcUrl, skip });
      await one();
      await pauser.ask({ type: 'ran', arm: true, prefix: srcUrl, skip });
      pauser.stacks.length = 0;
      try {
        await one();
      } finally {
        await pauser.ask({ type: 'disarm' });
      }
      return controlCalls(pauser.stacks, srcUrl, ignore, graph, options.order);
    };
    const socks5Calls = await calls(() => socks5Get(gw.ports.socks5, 'alice', 'alice-pass', target.port));
    const httpCalls = await calls(() => httpGet(gw.ports.http, 'bob', 'bob-pass', target.port));
    return { socks5, http, socks5Calls, httpCalls };
  } finally {
    await gw.close();
    await target.close();
    await pauser.stop();
  }
}

export const SRC_DIR = fileURLToPath(new URL('../../src/', import.meta.url));
