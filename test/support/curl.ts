// The one way the tests run curl (a real client in HTTP, CONNECT and SOCKS5 modes). Every caller's own helper
// is a view of this result. Proxy variables of the environment are dropped, so a developer's http_proxy never
// sits between a test and its loopback proxy.
import { spawn } from 'node:child_process';

export interface CurlRun {
  /** curl's exit code: 0 ok, 18 partial, 28 timeout, 56 recv failure / CONNECT refused, 97 SOCKS5 refusal … */
  exitCode: number;
  /** stdout as curl wrote it (without the report when `report` was asked for). */
  stdout: string;
  stderr: string;
  /** With `report`: the final HTTP status (0 when none). */
  status: number;
  /** With `report`: the CONNECT answer's status (curl -p; 0 when none). */
  connectStatus: number;
  /** With `report`: body bytes received. */
  size: number;
  elapsedMs: number;
}

export interface CurlOptions {
  /** --max-time, seconds; default 30. */
  maxTimeS?: number;
  /** Adds a `-w` report (status, CONNECT status, size) after the caller's args; off when the caller has its own -w. */
  report?: boolean;
  /** Decodes stdout as; default utf8 (latin1 keeps binary bodies one char per byte). */
  encoding?: BufferEncoding;
}

const REPORT_MARK = '\n@@curl-report@@';

const cleanEnv = (): NodeJS.ProcessEnv => Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_proxy$/i.test(k)));

/** Runs curl -sS with `args`; never rejects on curl's own failures (the exit code says). */
export function runCurl(args: string[], options: CurlOptions = {}): Promise<CurlRun> {
  const started = Date.now();
  const report = options.report ? ['-w', `${REPORT_MARK}%{http_code} %{http_connect} %{size_download}`] : [];
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-sS', '--max-time', String(options.maxTimeS ?? 30), ...args, ...report], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: cleanEnv(),
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.once('error', reject);
    child.once('close', (code) => {
      let stdout = Buffer.concat(out).toString(options.encoding ?? 'utf8');
      let status = 0;
      let connectStatus = 0;
      let size = 0;
      const at = options.report ? stdout.lastIndexOf(REPORT_MARK) : -1;
      if (at >= 0) {
        [status = 0, connectStatus = 0, size = 0] = stdout
          .slice(at + REPORT_MARK.length)
          .trim()
          .split(' ')
          .map(Number);
        stdout = stdout.slice(0, at);
      }
      resolve({
        exitCode: code ?? -1,
        stdout,
        stderr: Buffer.concat(err).toString('utf8'),
        status,
        connectStatus,
        size,
        elapsedMs: Date.now() - started,
      });
    });
  });
}
