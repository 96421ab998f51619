// Password floods against the real daemon (`bin/rotor.js start`, embedded sandbox, npm start's environment):
//   1. a customer's plain-HTTP requests, quiet, then while 32 connections send distinct wrong passwords for an
//      API-made user: p50/p99 and failures (target: flood p99 <= 3 x quiet p99, no failure);
//   2. 407 medians for unknown names against a known name (default proxy.auth: failures answered >= 250 ms).
// Bounded in count: REQUESTS customer requests per phase (default 200), NAMES probes per kind (default 15).
// Usage: npm run bench:abuse-auth  [REQUESTS=200 NAMES=15]
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { execFileSync } from 'node:child_process';
import { ensureBuilt, spawnRotor, npmStartCommand, npmStartNodeFlags } from './daemon.ts';

const REQUESTS = Number(process.env.REQUESTS ?? 200);
const NAMES = Number(process.env.NAMES ?? 15);
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

async function customer(port: number, url: string, n: number): Promise<{ times: number[]; failures: number }> {
  const c = new Client(port);
  const times: number[] = [];
  let failures = 0;
  for (let i = 0; i < n; i++) {
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
  const daemon = await spawnRotor(
    (dir) => ({
      platform: { mode: 'embedded' },
      proxy: { http: { host: '127.0.0.1', port: 0 }, socks5: { host: '127.0.0.1', port: 0 } },
      admin: { host: '127.0.0.1', port: 0 },
      callback: { host: '127.0.0.1', port: 0 },
      store: { path: `${dir}/rotor.db` },
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
    const quiet = await customer(daemon.http, url, REQUESTS);
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
    const flooded = await customer(daemon.http, url, REQUESTS);
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
      `customer quiet:  p50 ${pct(quiet.times, 50).toFixed(1)} ms  p99 ${pct(quiet.times, 99).toFixed(1)} ms  failures ${quiet.failures}/${REQUESTS}`,
    );
    console.log(
      `customer flood:  p50 ${pct(flooded.times, 50).toFixed(1)} ms  p99 ${pct(flooded.times, 99).toFixed(1)} ms  failures ${flooded.failures}/${REQUESTS}  (${FLOODERS} connections, ${attempts} wrong passwords in ${floodSeconds.toFixed(1)} s)`,
    );
    console.log(`p99 ratio flood/quiet: ${(pct(flooded.times, 99) / pct(quiet.times, 99)).toFixed(2)} (target <= 3)`);
    console.log(
      `407 medians: unknown name ${pct(medians.unknown!, 50).toFixed(1)} ms, known name ${pct(medians.known!, 50).toFixed(1)} ms (${NAMES} each)`,
    );
    console.log(`metrics: ${failuresLine}`);
  } finally {
    await daemon.stop();
    target.close();
  }
}

await main();
