// The processes of a bench run: children that announce themselves with one JSON line, Debian's microsocks
// squid and tinyproxy on free loopback ports, and the RSS of a process read from /proc.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
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

/** CPU time (user + system, all threads) a process has used, in ms; NaN once it is gone. */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at index 2 (state); utime, stime are 14, 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

/**
 * CPU ms (user + system) of a process's main thread and of its other threads (the collector's helpers, workers,
 * libuv's pool), and how much of both was in the kernel (`sys`).
 */
export function threadCpuMs(pid: number): { main: number; other: number; sys: number } {
  let main = 0;
  let other = 0;
  let sys = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(f[11]) + Number(f[12])) * 1000) / TICKS_PER_SECOND;
      sys += (Number(f[12]) * 1000) / TICKS_PER_SECOND;
      if (tid === String(pid)) main += ms;
      else other += ms;
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return { main, other, sys };
}
