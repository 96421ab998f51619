// The processes of a bench run: children that announce themselves with one JSON line, Debian's microsocks
// squid and tinyproxy on free loopback ports, and the RSS of a process read from /proc.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import {
  startMicrosocks,
  startSquid,
  startTinyproxy as startTinyproxyDaemon,
  stopChild,
  type UpstreamDaemon,
} from '../test/support/upstreams.ts';

export interface Proc {
  pid: number;
  stop(): Promise<void>;
}

export class BenchSetupError extends Error {
  readonly code = 'BENCH_SETUP';
  constructor(message: string) {
    super(message);
    this.name = 'BenchSetupError';
  }
}

/** Starts `command args` and resolves with the first line it prints on stdout, parsed as JSON. */
export function startJsonChild<T extends { pid: number }>(
  command: string,
  args: string[],
  timeoutMs = 20_000,
): Promise<{ info: T; proc: Proc }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new BenchSetupError(`${args.join(' ')} did not announce itself within ${timeoutMs} ms`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new BenchSetupError(`${command} ${args[args.length - 1]} exited early (${code})`));
    });
    lines.once('line', (line) => {
      clearTimeout(timer);
      child.removeAllListeners('exit');
      // Keep draining stdout so the child never blocks on a full pipe.
      child.stdout!.resume();
      resolve({ info: JSON.parse(line) as T, proc: { pid: child.pid!, stop: () => stopChild(child) } });
    });
  });
}

export type Upstream = UpstreamDaemon;
export { startMicrosocks, startSquid };

/** tinyproxy with room for many tunnels: `maxClients` clients, idle for up to 10 minutes (bench/connlog.ts). */
export function startTinyproxy(username: string, password: string, maxClients: number): Promise<Upstream> {
  return startTinyproxyDaemon(username, password, { maxClients, timeoutSeconds: 600 });
}

/** Resident set size of a process in bytes (VmRSS), threads included. */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new BenchSetupError(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

const TICKS_PER_SECOND = 100;

/** utime + stime and stime alone, in ms, from a /proc stat file; NaN when it cannot be read. */
function statCpuMs(file: string): { ms: number; sys: number } {
  try {
    const stat = readFileSync(file, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ms: ((Number(f[11]) + Number(f[12])) * 1000) / TICKS_PER_SECOND, sys: (Number(f[12]) * 1000) / TICKS_PER_SECOND };
  } catch {
    return { ms: NaN, sys: NaN };
  }
}

/** CPU time (user + system, all threads, ended ones included) a process has used, in ms; NaN once it is gone. */
export function cpuMs(pid: number): number {
  return statCpuMs(`/proc/${pid}/stat`).ms;
}

/**
 * CPU ms (user + system) of a process's main thread and of its other threads (the collector's helpers, workers,
 * libuv's pool), and how much of both was in the kernel (`sys`). `other` is the process's total (/proc/PID/stat,
 * which keeps the time of threads that have ended) less the main thread's: a sum over the threads alive now would
 * lose a thread's whole time when it ends between two readings (a password-hash thread ending 30 s after its last
 * hash made a gateway's figure ~260 ms too low in the window it ended in).
 */
export function threadCpuMs(pid: number): { main: number; other: number; sys: number } {
  const whole = statCpuMs(`/proc/${pid}/stat`);
  const main = statCpuMs(`/proc/${pid}/task/${pid}/stat`);
  return { main: main.ms, other: whole.ms - main.ms, sys: whole.sys };
}
