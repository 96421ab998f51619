// What runs for one SOCKS5 connection and one plain-HTTP request through a real daemon: the modules of src/ (and
// their functions) V8's precise coverage counts as called, in every one of a few rounds (a daemon timer that
// fires during one round falls out, and so does what ran in as long an idle window after each round: the
// daemon's own timers, which on a loaded machine fire in every round). Each is a new client connection of a user already served (its pool holds
// nodes, its login verified once). Used by bench/path-modules.ts (docs/architecture.md "As it runs") and by
// test/architecture/paths.test.ts.
import { Session } from 'node:inspector/promises';
import { fileURLToPath } from 'node:url';
import { startGateway } from '../e2e/harness.ts';
import { startHttpTarget } from './target.ts';
import { httpGet, socks5Get } from './path-clients.ts';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

/** Per module of src/ (its path under src/), the functions that ran. */
export type Ran = Map<string, Set<string>>;

export async function measurePaths(rounds = 3, ignore: ReadonlySet<string> = new Set(['sim'])): Promise<{ socks5: Ran; http: Ran }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Debugger.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  const sources = new Map<string, string>();
  /** The first characters of an anonymous function, from the code V8 runs (tsx's output of the module). */
  const snippet = async (scriptId: string, offset: number): Promise<string> => {
    let text = sources.get(scriptId);
    if (text === undefined) {
      text = (await session.post('Debugger.getScriptSource', { scriptId })).scriptSource;
      sources.set(scriptId, text);
    }
    return text.slice(offset, offset + 60).replace(/\s+/g, ' ');
  };
  const ran = async (): Promise<Ran> => {
    const { result } = await session.post('Profiler.takePreciseCoverage');
    const out: Ran = new Map();
    for (const script of result) {
      if (!script.url.startsWith('file://')) continue;
      const path = fileURLToPath(script.url);
      if (!path.startsWith(SRC)) continue;
      const file = path.slice(SRC.length);
      if (ignore.has(file.split('/')[0]!)) continue;
      for (const f of script.functions) {
        // Function-level counts: the first range is the whole function.
        if ((f.ranges[0]?.count ?? 0) === 0) continue;
        if (!out.has(file)) out.set(file, new Set());
        out.get(file)!.add(f.functionName || `(${await snippet(script.scriptId, f.ranges[0]!.startOffset)})`);
      }
    }
    return out;
  };
  const measure = async (one: () => Promise<void>): Promise<Ran> => {
    let common: Ran | undefined;
    const idle: Ran = new Map();
    for (let i = 0; i < rounds; i++) {
      await ran();
      const started = Date.now();
      await one();
      // The relay ends and the record with it on the sockets' close events, a few turns later: let them run.
      await new Promise((r) => setTimeout(r, 50));
      const now = await ran();
      if (common === undefined) common = now;
      else
        for (const [f, fns] of [...common]) {
          const seen = now.get(f);
          if (seen === undefined) common.delete(f);
          else for (const fn of [...fns]) if (!seen.has(fn)) fns.delete(fn);
        }
      // The same time with no client: what runs then is the daemon's own timers (a health probe's tick, a
      // pool's census), which on a loaded machine can fire in every round; it is not the connection's path.
      // Longer than a period of every daemon timer that can fire in each round: the health probe's 250 ms tick
      // and the users directory's 1 s sweep of expired users. A window shorter than a timer's period can alias
      // with it: on a loaded machine rounds of ~0.5 s met a 1 s timer in every round and in no idle window.
      const took = Math.max(1100, Date.now() - started);
      await ran();
      await new Promise((r) => setTimeout(r, took));
      for (const [f, fns] of await ran()) for (const fn of fns) (idle.get(f) ?? idle.set(f, new Set()).get(f)!).add(fn);
    }
    if (common === undefined) return new Map();
    for (const [f, fns] of [...common]) {
      for (const fn of idle.get(f) ?? []) fns.delete(fn);
      if (fns.size === 0) common.delete(f);
    }
    return common;
  };
  const target = await startHttpTarget();
  const gw = await startGateway();
  try {
    // Warm-up: each user's pool holds nodes (its first connection draws them), its login is verified once.
    await socks5Get(gw.ports.socks5, 'alice', 'alice-pass', target.port);
    await httpGet(gw.ports.http, 'bob', 'bob-pass', target.port);
    const socks5 = await measure(() => socks5Get(gw.ports.socks5, 'alice', 'alice-pass', target.port));
    const http = await measure(() => httpGet(gw.ports.http, 'bob', 'bob-pass', target.port));
    return { socks5, http };
  } finally {
    await gw.close();
    await target.close();
    session.disconnect();
  }
}
