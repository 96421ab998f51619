// M1 with wrk: plain-HTTP forwarding through a proxy. wrk cannot use a proxy, so it is pointed at the proxy
// port and a Lua script makes every request an absolute-URI one with Proxy-Authorization, as a proxy
// client sends it.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface WrkResult {
  requestsPerSecond: number;
  requests: number;
  /** non-2xx/3xx answers plus socket errors (connect, read, write, timeout) */
  errors: number;
}

export interface WrkJob {
  proxyPort: number;
  targetPort: number;
  username: string;
  password: string;
  connections: number;
  durationSeconds: number;
  threads?: number;
}

export class WrkError extends Error {
  readonly code = 'BENCH_WRK';
}

function script(job: WrkJob): string {
  const auth = Buffer.from(`${job.username}:${job.password}`).toString('base64');
  return [
    'wrk.method = "GET"',
    `wrk.path = "http://127.0.0.1:${job.targetPort}/small"`,
    `wrk.headers["Host"] = "127.0.0.1:${job.targetPort}"`,
    `wrk.headers["Proxy-Authorization"] = "Basic ${auth}"`,
    '',
  ].join('\n');
}

export function parseWrk(output: string): WrkResult {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(output);
  const total = /(\d+) requests in/.exec(output);
  if (!rps || !total) throw new WrkError(`unreadable wrk output: ${output.slice(0, 300)}`);
  let errors = 0;
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(output);
  if (non2xx) errors += Number(non2xx[1]);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  // A proxy that closes after each answer (tinyproxy) shows up as read errors when wrk reuses the socket
  // it was about to lose; those are reconnects, not failures. Count connect/write/timeout only.
  if (socket) errors += Number(socket[1]) + Number(socket[3]) + Number(socket[4]);
  return { requestsPerSecond: Number(rps[1]), requests: Number(total[1]), errors };
}

export function runWrk(job: WrkJob): Promise<WrkResult> {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-bench-wrk-'));
  const file = join(dir, 'proxy.lua');
  writeFileSync(file, script(job));
  const args = [
    `-t${job.threads ?? 1}`,
    `-c${job.connections}`,
    `-d${job.durationSeconds}s`,
    '--timeout',
    '5s',
    '-s',
    file,
    `http://127.0.0.1:${job.proxyPort}/`,
  ];
  return new Promise<WrkResult>((resolve, reject) => {
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', (err) => reject(new WrkError(`wrk: ${err.message}`)));
    child.on('close', (code) => {
      if (code !== 0) return reject(new WrkError(`wrk exited ${code}: ${out.slice(0, 300)}`));
      try {
        resolve(parseWrk(out));
      } catch (err) {
        reject(err as Error);
      }
    });
  }).finally(() => rmSync(dir, { recursive: true, force: true }));
}
