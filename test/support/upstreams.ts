// Debian's microsocks and tinyproxy as real upstream proxies on free loopback ports, for the proxy tests and
// the bench.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitForPort } from './ports.ts';

export interface UpstreamDaemon {
  pid: number;
  port: number;
  username: string;
  password: string;
  stop(): Promise<void>;
}

/** SIGTERM, then SIGKILL if the child is still there after `graceMs`. */
export function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
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

/** microsocks with user/password auth. */
export async function startMicrosocks(username: string, password: string): Promise<UpstreamDaemon> {
  const port = await freePort();
  const child = spawn('microsocks', ['-i', '127.0.0.1', '-p', String(port), '-u', username, '-P', password], { stdio: 'ignore' });
  await waitForPort(port).catch(async (e: unknown) => {
    await stopChild(child);
    throw e;
  });
  return { pid: child.pid!, port, username, password, stop: () => stopChild(child) };
}

export interface TinyproxyOptions {
  /** tinyproxy's MaxClients (default 50). */
  maxClients?: number;
  /** tinyproxy's idle Timeout in seconds (default 30). */
  timeoutSeconds?: number;
}

/** tinyproxy in the foreground with Basic auth and CONNECT to any port. */
export async function startTinyproxy(username: string, password: string, options: TinyproxyOptions = {}): Promise<UpstreamDaemon> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'rotor-tinyproxy-'));
  const conf = join(dir, 'tinyproxy.conf');
  const lines = [
    `Port ${port}`,
    'Listen 127.0.0.1',
    `Timeout ${options.timeoutSeconds ?? 30}`,
    `MaxClients ${options.maxClients ?? 50}`,
    'LogLevel Critical',
    `BasicAuth ${username} ${password}`,
    'Allow 127.0.0.1',
    // No ConnectPort line: CONNECT to any port.
    'DisableViaHeader Yes',
  ];
  if (process.getuid?.() === 0) lines.push('User nobody', 'Group nogroup');
  writeFileSync(conf, `${lines.join('\n')}\n`);
  const child = spawn('tinyproxy', ['-d', '-c', conf], { stdio: 'ignore' });
  const stop = async (): Promise<void> => {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  };
  await waitForPort(port).catch(async (e: unknown) => {
    await stop();
    throw e;
  });
  return {
    pid: child.pid!,
    port,
    username,
    password,
    stop,
  };
}

/**
 * Debian's squid as a plain HTTP upstream proxy (no auth: credentials a client sends are ignored), with
 * keep-alive both ways, no cache, CONNECT to any port. Used where an upstream must keep connections alive
 * (tinyproxy closes after every response) and by the bench as the HTTP upstream.
 */
export async function startSquid(): Promise<UpstreamDaemon> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'rotor-squid-'));
  // squid started as root runs as user proxy: its log directory must be writable by it.
  chmodSync(dir, 0o777);
  const conf = join(dir, 'squid.conf');
  const lines = [
    `http_port 127.0.0.1:${port}`,
    `pid_filename ${join(dir, 'squid.pid')}`,
    `cache_log ${join(dir, 'cache.log')}`,
    `coredump_dir ${dir}`,
    'access_log none',
    'cache_store_log none',
    'netdb_filename none',
    'pinger_enable off',
    'cache deny all',
    'cache_mem 4 MB',
    'http_access allow all',
    'shutdown_lifetime 0 seconds',
    'via off',
    'forwarded_for delete',
  ];
  writeFileSync(conf, `${lines.join('\n')}\n`);
  const child = spawn('squid', ['-N', '-f', conf], { stdio: 'ignore' });
  const stop = async (): Promise<void> => {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  };
  await waitForPort(port, 15_000).catch(async (e: unknown) => {
    await stop();
    throw e;
  });
  return { pid: child.pid!, port, username: '', password: '', stop };
}
