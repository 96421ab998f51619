// The processes of a bench run: children that announce themselves with one JSON line, Debian's microsocks
// and tinyproxy on free loopback ports, and the RSS of a process read from /proc.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

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

function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
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

/** A free loopback port (bound, read and released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function waitForPort(port: number, deadlineMs = 5000): Promise<void> {
  const until = Date.now() + deadlineMs;
  return new Promise((resolve, reject) => {
    const attempt = (): void => {
      const s = connect({ host: '127.0.0.1', port });
      s.once('connect', () => {
        s.destroy();
        resolve();
      });
      s.once('error', () => {
        s.destroy();
        if (Date.now() > until) reject(new BenchSetupError(`port ${port} never opened`));
        else setTimeout(attempt, 25);
      });
    };
    attempt();
  });
}

export interface Upstream extends Proc {
  port: number;
  username: string;
  password: string;
}

export async function startMicrosocks(username: string, password: string): Promise<Upstream> {
  const port = await freePort();
  const child = spawn('microsocks', ['-i', '127.0.0.1', '-p', String(port), '-u', username, '-P', password], { stdio: 'ignore' });
  await waitForPort(port);
  return { pid: child.pid!, port, username, password, stop: () => stopChild(child) };
}

/** tinyproxy in the foreground: Basic auth, CONNECT to any port, room for the memory case's tunnels. */
export async function startTinyproxy(username: string, password: string, maxClients: number): Promise<Upstream> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'rotor-bench-tinyproxy-'));
  const conf = join(dir, 'tinyproxy.conf');
  const lines = [
    `Port ${port}`,
    'Listen 127.0.0.1',
    'Timeout 600',
    `MaxClients ${maxClients}`,
    'LogLevel Critical',
    `BasicAuth ${username} ${password}`,
    'Allow 127.0.0.1',
    'DisableViaHeader Yes',
  ];
  if (process.getuid?.() === 0) lines.push('User nobody', 'Group nogroup');
  writeFileSync(conf, `${lines.join('\n')}\n`);
  const child = spawn('tinyproxy', ['-d', '-c', conf], { stdio: 'ignore' });
  await waitForPort(port);
  return {
    pid: child.pid!,
    port,
    username,
    password,
    stop: async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
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
