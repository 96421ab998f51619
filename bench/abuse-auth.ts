// Password floods against the real daemon (`bin/rotor.js start`, embedded sandbox, npm start's environment):
//   1. a customer's plain-HTTP requests, quiet, then while 32 connections send distinct wrong passwords for an
//      API-made user: p50/p99 and failures (target: flood p99 <= 3 x quiet p99, no failure);
//   2. 407 medians for unknown names against a known name (default proxy.auth: failures answered >= 250 ms).
//   3. the connection log under ATTEMPTS (default 20,000) unauthenticated attempts (pipelined plain-HTTP
//      requests without or with wrong credentials, SOCKS5 wrong passwords and malformed greetings, from 8
//      loopback addresses): rows and the SQLite file (with its WAL) before and after (target: <= 1,000 rows,
//      file < 2 x).
// Bounded: REQUESTS customer requests per phase (default 200), or PHASE_SECONDS per phase when set (the flood lasts
// as long as the flooded phase); NAMES probes per kind (default 15); ATTEMPTS.
// Usage: npm run bench:abuse-auth  [REQUESTS=200 | PHASE_SECONDS=10] [NAMES=15] [ATTEMPTS=20000]
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { ensureBuilt, spawnRotor, npmStartCommand, npmStartNodeFlags } from './daemon.ts';

const REQUESTS = Number(process.env.REQUESTS ?? 200);
const SECONDS = Number(process.env.PHASE_SECONDS ?? 0);
const NAMES = Number(process.env.NAMES ?? 15);
const ATTEMPTS = Number(process.env.ATTEMPTS ?? 20_000);
const FLOODERS = 32;

const basic = (user: string, pass: string) => `Proxy-Authorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}\r\n`;

/** A kept-alive plain-HTTP client (opened again when closed): one request at a time, resolves with the status. */
class Client {
  private socket: Socket | undefined;
  private buffer = '';
  private waiting: ((status: number) => void) | undefined;
  constructor(private readonly port: number) {}
  request(url: string, user: string, pass: string): Promise<number> {
    const socket = (this.socket ??= this.open());
    return new Promise((resolve) => {
      this.waiting = resolve;
      socket.write(`GET ${url} HTTP/1.1\r\nHost: x\r\n${basic(user, pass)}\r\n`);
    });
  }
  close(): void {
    this.socket?.destroy();
  }
  private open(): Socket {
    const socket = connect({ host: '127.0.0.1', port: this.port });
    this.buffer = '';
    socket.setEncoding('latin1');
    socket.on('error', () => undefined);
    socket.on('data', (d: string) => {
      this.buffer += d;
      const at = this.buffer.indexOf('\r\n\r\n');
      if (at < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(this.buffer.slice(0, at))?.[1] ?? 0);
      if (this.buffer.length < at + 4 + length) return;
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(this.buffer)?.[1] ?? 0);
      this.buffer = this.buffer.slice(at + 4 + length);
      const w = this.waiting;
      this.waiting = undefined;
      w?.(status);
    });
    socket.on('close', () => {
      if (this.socket === socket) this.socket = undefined;
      const w = this.waiting;
      this.waiting = undefined;
      w?.(0);
    });
    return socket;
  }
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;

/** `n` requests one after another, or as many as fit in PHASE_SECONDS when it is set. */
async function customer(port: number, url: string, n: number, seconds = 0): Promise<{ times: number[]; failures: number }> {
  const c = new Client(port);
  const times: number[] = [];
  let failures = 0;
  const until = performance.now() + seconds * 1000;
  for (let i = 0; seconds > 0 ? performance.now() < until : i < n; i++) {
    const t = performance.now();
    const status = await c.request(`${url}/${i}`, 'legit', 'legit-password-1');
    times.push(performance.now() - t);
    if (status !== 200) failures++;
  }
  c.close();
  return { times, failures };
}

async function main(): Promise<void> {
  ensureBuilt((text) => console.log(text));
  const target: Server = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
  let dbFile = '';
  const daemon = await spawnRotor(
    (dir) => ({
      platform: { mode: 'embedded' },
      proxy: { http: { host: '127.0.0.1', port: 0 }, socks5: { host: '127.0.0.1', port: 0 } },
      admin: { host: '127.0.0.1', port: 0 },
      callback: { host: '127.0.0.1', port: 0 },
      store: { path: (dbFile = `${dir}/rotor.db`) },
      // info: the ready line (ports) is read from the log
      users: [{ name: 'legit', password: 'legit-password-1', mainAccount: 'bench' }],
    }),
    npmStartNodeFlags(),
    120_000,
    npmStartCommand().env,
  );
  try {
    const made = await fetch(`http://127.0.0.1:${daemon.admin}/v1/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'victim', password: 'victim-password-1', mainAccount: 'bench' }),
    });
    if (made.status !== 201) throw new Error(`POST /v1/users: ${made.status} ${await made.text()}`);
    await customer(daemon.http, url, 20); // warm: pool drawn, password verified
    const quiet = await customer(daemon.http, url, REQUESTS, SECONDS);
    let stop = false;
    let attempts = 0;
    const flooders = Array.from({ length: FLOODERS }, async (_, w) => {
      const c = new Client(daemon.http);
      for (let i = 0; !stop; i++) {
        await c.request(`${url}/f`, 'victim', `wrong-${w}-${i}-${Math.random()}`);
        attempts++;
      }
      c.close();
    });
    const started = performance.now();
    const flooded = await customer(daemon.http, url, REQUESTS, SECONDS);
    const floodSeconds = (performance.now() - started) / 1000;
    stop = true;
    await Promise.all(flooders);
    const medians: Record<string, number[]> = { unknown: [], known: [] };
    const c = new Client(daemon.http);
    for (let i = 0; i < NAMES; i++) {
      for (const [kind, user] of [
        ['unknown', `nobody${i}`],
        ['known', 'victim'],
      ] as const) {
        const t = performance.now();
        await c.request(`${url}/m`, user, `guess-${i}-${Math.random()}`);
        medians[kind]!.push(performance.now() - t);
      }
    }
    c.close();
    const log = await connectionLogFlood(daemon.http, daemon.socks5, dbFile);
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD']).toString().trim();
    const metrics = await (await fetch(`http://127.0.0.1:${daemon.admin}/metrics`)).text();
    const failuresLine = metrics
      .split('\n')
      .filter((l) => l.startsWith('rotor_auth_failures_total'))
      .join('; ');
    console.log(
      `abuse-auth bench, ${new Date().toISOString()}, commit ${commit}, load ${execFileSync('cat', ['/proc/loadavg']).toString().trim()}`,
    );
    console.log(
      `customer quiet:  p50 ${pct(quiet.times, 50).toFixed(1)} ms  p99 ${pct(quiet.times, 99).toFixed(1)} ms  failures ${quiet.failures}/${quiet.times.length}`,
    );
    console.log(
      `customer flood:  p50 ${pct(flooded.times, 50).toFixed(1)} ms  p99 ${pct(flooded.times, 99).toFixed(1)} ms  failures ${flooded.failures}/${flooded.times.length}  (${FLOODERS} connections, ${attempts} wrong passwords in ${floodSeconds.toFixed(1)} s)`,
    );
    console.log(`p99 ratio flood/quiet: ${(pct(flooded.times, 99) / pct(quiet.times, 99)).toFixed(2)} (target <= 3)`);
    console.log(
      `407 medians: unknown name ${pct(medians.unknown!, 50).toFixed(1)} ms, known name ${pct(medians.known!, 50).toFixed(1)} ms (${NAMES} each)`,
    );
    console.log(`metrics: ${failuresLine}`);
    console.log(
      `connection log: ${log.attempts} unauthenticated attempts in ${log.seconds.toFixed(1)} s: ${log.rowsBefore} -> ${log.rowsAfter} rows (target <= 1,000); ` +
        `file with WAL ${kib(log.before)} -> ${kib(log.after)} KiB (${(log.after / log.before).toFixed(2)} x, target < 2 x)`,
    );
  } finally {
    await daemon.stop();
    target.close();
  }
}

const kib = (n: number) => (n / 1024).toFixed(0);

/** The SQLite file and its WAL. */
function onDisk(file: string): number {
  const size = (f: string) => (existsSync(f) ? statSync(f).size : 0);
  return size(file) + size(`${file}-wal`);
}

/** One connection from `source` writing `n` pipelined requests (no credentials, or wrong ones); resolves with the answers. */
function pipelined(port: number, source: string, n: number, wrong: boolean): Promise<number> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, localAddress: source });
    let answers = 0;
    let text = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      text += d;
      let at: number;
      while ((at = text.indexOf('HTTP/1.1 ')) >= 0) {
        text = text.slice(at + 9);
        if (++answers === n) s.end();
      }
    });
    s.on('error', () => undefined);
    s.on('close', () => resolve(answers));
    let head = '';
    for (let i = 0; i < n; i++)
      head += `GET http://127.0.0.1:9/x HTTP/1.1\r\nHost: 127.0.0.1:9\r\n${wrong ? basic('nobody', `w${i % 4}`) : ''}\r\n`;
    s.write(head);
  });
}

/** One SOCKS5 attempt: a wrong password, or a malformed greeting. */
function socks5(port: number, source: string, malformed: boolean): Promise<number> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, localAddress: source });
    s.on('error', () => undefined);
    s.on('data', () => undefined);
    s.on('close', () => resolve(1));
    s.end(malformed ? Buffer.from([4, 1, 0, 80, 127, 0, 0, 1, 0]) : Buffer.from([5, 1, 2, 1, 1, 0x6e, 1, 0x77]));
  });
}

async function connectionLogFlood(http: number, socks: number, file: string) {
  const db = new Database(file, { readonly: true });
  const rows = () => Number((db.prepare('SELECT COUNT(*) AS n FROM connections').get() as { n: number }).n);
  const rowsBefore = rows();
  const before = onDisk(file);
  const sources = Array.from({ length: 8 }, (_, i) => `127.0.3.${i + 1}`);
  const started = performance.now();
  let attempts = 0;
  while (attempts < ATTEMPTS) {
    const jobs: (() => Promise<number>)[] = [];
    for (const source of sources) {
      jobs.push(
        () => pipelined(http, source, 16, false),
        () => pipelined(http, source, 16, true),
      );
      jobs.push(
        () => socks5(socks, source, false),
        () => socks5(socks, source, true),
        () => socks5(socks, source, true),
      );
    }
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < jobs.length) {
          const n = await jobs[next++]!();
          attempts += n;
        }
      }),
    );
  }
  const seconds = (performance.now() - started) / 1000;
  // Past one refusal window (60 s) and a flush, every attempt of the flood is in a record.
  await new Promise((r) => setTimeout(r, 62_000));
  const result = { attempts, seconds, rowsBefore, rowsAfter: rows(), before, after: onDisk(file) };
  db.close();
  return result;
}

await main();
