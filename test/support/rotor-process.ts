// The one launcher of Rotor as a child process (`node <rotorEntry()> <command> [args]` from the repo root),
// for the tests that need a real process: signals, exit codes, restarts, kill -9. Its stdout and stderr go
// to a log file (so a killed process's last lines can still be read); for `start`, the launcher resolves
// once the log says 'rotor is ready' and reads the ports from that line.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { poll } from './wait.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

function newestMtime(dir: string): number {
  let newest = statSync(dir).mtimeMs;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

let entry: string[] | undefined;
/**
 * The node arguments that run the `rotor` command: the compiled dist/cli.js (what bin/rotor.js runs) when a
 * build of the current src/ is there and no build is writing it (npm ci's prepare makes one; npm test builds
 * one for the benches), otherwise src/cli.ts through tsx. A process under tsx spends about 0.45 s more CPU
 * loading its modules, and the suite starts ~120 of them. A file in src/ newer than dist/cli.js (an edit, a
 * checkout) means tsx. ROTOR_TEST_ENTRY=src forces tsx.
 */
export function rotorEntry(): string[] {
  if (entry) return entry;
  const cli = join(REPO_ROOT, 'dist', 'cli.js');
  const built =
    process.env.ROTOR_TEST_ENTRY !== 'src' &&
    !existsSync(join(REPO_ROOT, '.tmp', 'dist-build.lock')) &&
    existsSync(cli) &&
    statSync(cli).mtimeMs >= newestMtime(join(REPO_ROOT, 'src'));
  entry = built ? [cli] : ['--import', 'tsx', join(REPO_ROOT, 'src', 'cli.ts')];
  return entry;
}

export interface RotorPorts {
  http: number;
  socks5: number;
  admin: number;
  callback: number;
}

export interface RotorChild {
  child: ChildProcess;
  pid: number;
  ports: RotorPorts;
  logFile: string;
  /** Everything the process wrote so far. */
  output(): string;
  /** The log as pino records (a line that is not JSON is `{ raw }`). */
  lines(): Array<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  signal(sig: NodeJS.Signals): void;
  /** Sends `signal` (SIGTERM) and waits for the exit, SIGKILL after `timeoutMs`. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface LaunchOptions {
  /** After `start`: e.g. ['--config', file]. */
  args?: string[];
  /**
   * The child's ROTOR_* variables: exactly these (the test runner's own, such as ROTOR_LOG_LEVEL=silent,
   * would override the config file's settings). Other variables are inherited.
   */
  env?: Record<string, string>;
  /** Where stdout and stderr go; default a file in a temp dir removed when the process exits. */
  logFile?: string;
  readyTimeoutMs?: number;
  /** Node's own arguments before the entry (e.g. `--import` of a test's module). */
  nodeArgs?: string[];
}

function childEnv(own: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('ROTOR_')) env[k] = v;
  return { ...env, ...own };
}

export async function launchRotor(options: LaunchOptions = {}): Promise<RotorChild> {
  const tmp = options.logFile ? undefined : mkdtempSync(join(tmpdir(), 'rotor-child-'));
  const logFile = options.logFile ?? join(tmp!, 'rotor.log');
  const fd = openSync(logFile, 'a');
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), ...rotorEntry(), 'start', ...(options.args ?? [])], {
    cwd: REPO_ROOT,
    env: childEnv(options.env ?? {}),
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const output = (): string => {
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '';
    }
  };
  const lines = (): Array<Record<string, unknown>> =>
    output()
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, unknown>;
        } catch {
          return { raw: l };
        }
      });
  const timeoutMs = options.readyTimeoutMs ?? 30_000;
  const ready = await poll(
    () => {
      if (gone) throw new Error(`rotor start exited before it was ready:\n${output().slice(-2000)}`);
      return lines().find((l) => l.msg === 'rotor is ready');
    },
    { what: `rotor start to be ready (${timeoutMs} ms)`, timeoutMs, everyMs: 50 },
  ).catch((err: unknown) => {
    child.kill('SIGKILL');
    throw err instanceof Error && !gone ? new Error(`${err.message}:\n${output().slice(-2000)}`) : err;
  });
  if (tmp) void exited.then(() => rmSync(tmp, { recursive: true, force: true }));
  const r = ready as unknown as { http: { port: number }; socks5: { port: number }; admin: number; callback: number };
  return {
    child,
    pid: child.pid!,
    ports: { http: r.http.port, socks5: r.socks5.port, admin: r.admin, callback: r.callback },
    logFile,
    output,
    lines,
    exited,
    signal: (sig) => child.kill(sig),
    async stop(signal: NodeJS.Signals = 'SIGTERM', stopTimeoutMs = 15_000) {
      if (!gone) {
        child.kill(signal);
        const t = setTimeout(() => child.kill('SIGKILL'), stopTimeoutMs);
        await exited;
        clearTimeout(t);
      }
      return exited;
    },
  };
}

/**
 * Runs one of the repository's TypeScript scripts (`node --import tsx <script> [args]` from the repo root,
 * e.g. a bench) to its end; resolves with its exit code and output. SIGKILLed after `timeoutMs`. With
 * `rotorEnv` the child's ROTOR_* variables are exactly these (as in LaunchOptions.env); without, inherited.
 */
export function runScript(
  script: string,
  args: string[],
  timeoutMs: number,
  rotorEnv?: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      cwd: REPO_ROOT,
      ...(rotorEnv ? { env: childEnv(rotorEnv) } : {}),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Runs `rotor <args>` (a short command such as `users import`) to its end with the ROTOR_* variables of this
 * process left out; resolves with its exit code (-1 when killed) and output.
 */
export function runRotorCommand(args: string[], timeoutMs = 120_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...rotorEntry(), ...args],
      { cwd: REPO_ROOT, env: childEnv({}), timeout: timeoutMs },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
      },
    );
  });
}
