// process.nextTick's feedback in a running gateway: whether the define slots of its tick object literal
// (`{ [async_id_symbol]: …, [trigger_async_id_symbol]: …, callback, args }`) are MONOMORPHIC (V8 builds the object
// inline) or MEGAMORPHIC (each property defined through Runtime_DefineKeyedOwnPropertyInLiteral, ~0.5 µs per
// nextTick call). A build (`rotor start` as `npm start` runs it) runs with bench/feedback-preload.mjs and its
// stdout on a file (V8's %DebugPrint writes there with C stdio, which a pipe from node, a non-blocking socket, would cut); the states are read when it is ready, after one second of
// load and after two more.
//
//   node --import tsx bench/feedback.ts [--case connect|socks5|M1] DIR[@N] [DIR ...]
//
// ROTOR_FEEDBACK_FLAGS='--no-sparkplug …': node options added after the build's own (to try V8 flags);
// ROTOR_FEEDBACK_PRELOAD=FILE: another preload; ROTOR_FEEDBACK_KEEP=FILE: the gateway's whole stdout kept there.
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { stopChild } from '../test/support/upstreams.ts';
import { benchConfig, npmStartCommand, parseGatewaySpec, withSemiSpace } from './daemon.ts';
import { startJsonChild, startMicrosocks, startSquid } from './procs.ts';
import { runLoad } from './rate-tunnels.ts';
import { HTTP_USER } from './spec.ts';

const PRELOAD = process.env.ROTOR_FEEDBACK_PRELOAD ?? new URL('./feedback-preload.mjs', import.meta.url).pathname;
const { values, positionals } = parseArgs({ allowPositionals: true, options: { case: { type: 'string', default: 'connect' } } });
const kind = values.case.toLowerCase();
const extra = (process.env.ROTOR_FEEDBACK_FLAGS ?? '').split(' ').filter(Boolean);

/** The states printed for `tag`: invocations so far, nextTick's code kind, and the literal's define slots. */
function states(out: string, tag: string): string {
  const at = out.lastIndexOf(`@@FB ${tag}`);
  const end = out.indexOf('@@END', at);
  if (at < 0 || end < 0) return `${tag}: not printed`;
  const txt = out.slice(at, end);
  const inv = /invocation count: (\d+)/.exec(txt)?.[1] ?? '-';
  const code = /- code: [^<]*<Code (\w+)/.exec(txt)?.[1] ?? '?';
  const slots = [...txt.matchAll(/slot #\d+ DefineKeyedOwnPropertyInLiteral (\w+)/g)].map((m) => m[1]);
  return `${tag}: ${inv} calls, code ${code}, literal ${slots.length > 0 ? slots.join(' ') : 'no feedback yet'}`;
}

const target = await startJsonChild<{ port: number; pid: number }>(process.execPath, [
  '--import',
  'tsx',
  new URL('./target.ts', import.meta.url).pathname,
]);
const socks = await startMicrosocks('bench', 'unused');
const squid = await startSquid();
try {
  for (const spec of positionals) {
    const { which, semiSpace } = parseGatewaySpec(spec);
    const root = resolve(which);
    const start = npmStartCommand(root);
    const dir = mkdtempSync(join(tmpdir(), 'rotor-feedback-'));
    const config = join(dir, 'rotor.yaml');
    writeFileSync(config, stringify(benchConfig(squid, socks, join(dir, 'rotor.db'))));
    const log = join(dir, 'out.txt');
    const fd = openSync(log, 'w');
    const env = { ...process.env } as Record<string, string>;
    for (const k of Object.keys(env)) if (k.startsWith('ROTOR_')) delete env[k];
    const child = spawn(
      process.execPath,
      [...withSemiSpace(start.nodeFlags, semiSpace), ...extra, '--import', PRELOAD, join(root, 'bin', 'rotor.js'), 'start'],
      { cwd: dir, env: { ...env, ...start.env, ROTOR_CONFIG: config }, stdio: ['ignore', fd, fd] },
    );
    try {
      let out = '';
      for (let i = 0; !out.includes('rotor is ready'); i++) {
        if (i > 600 || child.exitCode !== null) throw new Error(`${spec} not ready:\n${out.slice(-2000)}`);
        await sleep(100);
        out = readFileSync(log, 'utf8');
      }
      const line = out.slice(out.lastIndexOf('\n', out.indexOf('rotor is ready')) + 1).split('\n')[0]!;
      const rec = JSON.parse(line) as { http: { port: number }; socks5: { port: number } };
      const gateway = { pid: child.pid!, http: rec.http.port, socks5: rec.socks5.port, stop: async () => {} };
      const mark = async (tag: string): Promise<string> => {
        child.kill('SIGUSR2');
        for (let i = 0; i < 50; i++) {
          await sleep(100);
          const s = states(readFileSync(log, 'utf8'), tag);
          if (!s.endsWith('not printed')) return s;
        }
        return `${tag}: not printed`;
      };
      const load = (seconds: number): Promise<number> => runLoad({ kind, gateway, user: HTTP_USER, targetPort: target.info.port, seconds });
      process.stdout.write(`${spec} ${[...start.nodeFlags, ...extra].join(' ')}\n  ${await mark('sig1')} (ready)\n`);
      const a = await load(1);
      process.stdout.write(`  ${await mark('sig2')} (after ${a} operations)\n`);
      const b = await load(2);
      process.stdout.write(`  ${await mark('sig3')} (after ${a + b} operations)\n`);
    } finally {
      await stopChild(child, 15_000);
      if (process.env.ROTOR_FEEDBACK_KEEP) writeFileSync(process.env.ROTOR_FEEDBACK_KEEP, readFileSync(log));
      rmSync(dir, { recursive: true, force: true });
    }
  }
} finally {
  await squid.stop();
  await socks.stop();
  await target.proc.stop();
}
