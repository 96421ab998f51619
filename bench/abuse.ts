// The hostile customer of the proxy ports, bounded (issue 23 items 1 and 6, issue 25's read-ahead gap), against
// the real daemon: `rotor start` as a child process on the embedded sandbox, users made with POST /v1/users,
// a loopback target in this process that counts the body bytes it hands to its sockets (what the upstream
// sent, as the platform would charge it) and its requests in flight. Reports:
//   1. 4 connections × 500 pipelined GETs of 200 KB that never read: the daemon's RSS growth and the bytes
//      the target wrote (targets: ≤ 32 MiB, ≤ 4 × 1 MiB);
//   2. the most requests in flight at the target for a maxConnections: 2 user pipelining on 4 connections;
//   3. a 10 KiB/s user downloading on one connection, plain HTTP (500 pipelined GETs of 200 KB) and CONNECT (one
//      endless GET in the tunnel): what Rotor read from the upstream (its meter) and what the target wrote in
//      the first 10 s and in a steady 10-s window, against the rate; the difference at the end is what sits in
//      the kernel's and the upstream proxy's buffers between the target and Rotor;
//   4. the upstream-read minus client-delivered gap (plain HTTP and CONNECT) after an aborted, a rate-limited,
//      a quota-cut and a deleted-user download: the target's bytes and Rotor's record (bytesDown) against
//      what the client received.
//
//   npm run bench:abuse [-- --json FILE] [-- --only 3,4]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { launchRotor, REPO_ROOT as ROOT, type RotorChild } from '../test/support/rotor-process.ts';
import { poll } from '../test/support/wait.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const OBJ = 200 * 1000;
const PIECE = Buffer.alloc(16 * KiB, 0x61);

interface Target {
  port: number;
  written: number;
  inFlight: number;
  maxInFlight: number;
  requests: number;
  reset(): void;
  close(): Promise<void>;
}

/** GET /obj/<n> (after `delayMs`) and /stream: n bytes, or 1 GiB, in 16 KiB writes paced by the reader. */
async function startTarget(delayMs = 20): Promise<Target> {
  const t: Target = {
    port: 0,
    written: 0,
    inFlight: 0,
    maxInFlight: 0,
    requests: 0,
    reset() {
      t.written = 0;
      t.requests = 0;
      t.maxInFlight = t.inFlight;
    },
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  const server: Server = createServer((req, res) => {
    t.requests++;
    t.inFlight++;
    if (t.inFlight > t.maxInFlight) t.maxInFlight = t.inFlight;
    res.once('close', () => t.inFlight--);
    const m = /^\/obj\/(\d+)$/.exec(req.url ?? '');
    let left = m ? Number(m[1]) : 1024 * MiB;
    const pump = (): void => {
      while (left > 0) {
        const n = Math.min(left, PIECE.length);
        left -= n;
        t.written += n;
        if (!res.write(n === PIECE.length ? PIECE : PIECE.subarray(0, n))) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    setTimeout(
      () => {
        if (res.destroyed) return;
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(left) });
        pump();
      },
      m ? delayMs : 0,
    );
  });
  server.on('clientError', (_e, s) => s.destroy());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.port = (server.address() as AddressInfo).port;
  return t;
}

interface Client {
  socket: Socket;
  received: number;
  closed: Promise<void>;
}

/** A raw connection to `port`; reads (counting) unless `paused`. */
function client(port: number, paused: boolean): Promise<Client> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    if (paused) socket.pause();
    const c: Client = { socket, received: 0, closed: new Promise((r) => socket.once('close', () => r())) };
    socket.on('error', () => undefined);
    if (!paused) socket.on('data', (b: Buffer) => (c.received += b.length));
    socket.once('connect', () => resolve(c));
    socket.once('error', reject);
  });
}

const auth = (user: string): string => `Proxy-Authorization: Basic ${Buffer.from(`${user}:${user}-pass`).toString('base64')}\r\n`;
const get = (port: number, path: string, user: string | null): string =>
  `GET ${user === null ? path : `http://127.0.0.1:${port}${path}`} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${user === null ? '' : auth(user)}\r\n`;

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * KiB : 0;
}

/** Resolves once `value()` has not changed for `quietMs` (bounded by `timeoutMs`). */
async function settled(value: () => number, quietMs = 1000, timeoutMs = 30_000): Promise<number> {
  let last = value();
  let since = Date.now();
  return poll(
    () => {
      const v = value();
      if (v !== last) {
        last = v;
        since = Date.now();
      }
      return Date.now() - since >= quietMs ? v : undefined;
    },
    { timeoutMs, everyMs: 50, done: (v) => v !== undefined },
  );
}

const fmt = (n: number): string => (n >= MiB ? `${(n / MiB).toFixed(2)} MiB` : n >= KiB ? `${(n / KiB).toFixed(1)} KiB` : `${n} B`);

async function main(): Promise<void> {
  const jsonAt = process.argv.indexOf('--json');
  const jsonFile = jsonAt > 0 ? process.argv[jsonAt + 1] : undefined;
  // --only 3,4: just those cases (each makes its own users).
  const onlyAt = process.argv.indexOf('--only');
  const only = onlyAt > 0 ? new Set((process.argv[onlyAt + 1] ?? '').split(',').map(Number)) : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'rotor-abuse-'));
  const token = 'bench-abuse-token';
  const file = join(dir, 'rotor.yaml');
  // config/default.yaml (the embedded sandbox with its demo accounts, as `npm start` runs), every listener on
  // port 0, the store in a temp dir, the admin API behind a token.
  const config = parse(readFileSync(join(ROOT, 'config/default.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  config.proxy = { ...config.proxy, http: { host: '127.0.0.1', port: 0 }, socks5: { host: '127.0.0.1', port: 0 } };
  config.admin = { ...config.admin, host: '127.0.0.1', port: 0, token };
  config.callback = { ...config.callback, host: '127.0.0.1', port: 0 };
  config.store = { path: join(dir, 'rotor.db') };
  config.log = { ...config.log, level: 'info' };
  writeFileSync(file, stringify(config));
  let rotor: RotorChild | undefined;
  const target = await startTarget();
  const results: Record<string, unknown> = {};
  try {
    rotor = await launchRotor({ args: ['--config', file], env: { ROTOR_LOG_LEVEL: 'info' } });
    const { http, admin } = rotor.ports;
    const pid = rotor.pid;
    const api = async <T>(path: string, method = 'GET', body?: unknown): Promise<{ status: number; body: T }> => {
      const res = await fetch(`http://127.0.0.1:${admin}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
    };
    const makeUser = async (name: string, extra: Record<string, unknown> = {}): Promise<void> => {
      const r = await api('/v1/users', 'POST', { name, password: `${name}-pass`, mainAccount: 'shop1', ...extra });
      if (r.status !== 201) throw new Error(`POST /v1/users ${name}: ${r.status} ${JSON.stringify(r.body)}`);
      // Its first dial may wait for a draw: warmed on a connection of its own.
      const c = await client(http, false);
      let head = '';
      c.socket.on('data', (d: Buffer) => (head += d.toString('latin1')));
      c.socket.write(get(target.port, '/obj/10', name));
      await poll(() => c.received > 10, { timeoutMs: 15_000 });
      c.socket.destroy();
      await c.closed;
      if (!head.startsWith('HTTP/1.1 200')) throw new Error(`${name}'s first request: ${head.slice(0, 200)}`);
    };

    if (only === undefined || only.has(1)) {
      // 1. 4 × 500 pipelined GETs of 200 KB from clients that never read.
      await makeUser('abuse_pipe');
      target.reset();
      const rss0 = rssOf(pid);
      const never = await Promise.all(Array.from({ length: 4 }, () => client(http, true)));
      for (const c of never) c.socket.write(get(target.port, `/obj/${OBJ}`, 'abuse_pipe').repeat(500));
      await poll(() => target.requests > 0, { timeoutMs: 30_000 });
      const written1 = await settled(() => target.written, 2000, 60_000);
      const rss1 = rssOf(pid);
      results.pipelining = {
        requestsAtTarget: target.requests,
        upstreamBytes: written1,
        rssBefore: rss0,
        rssAfter: rss1,
        rssGrowth: rss1 - rss0,
      };
      console.log(
        `1. 4 × 500 pipelined GETs of 200 KB, never read: ${target.requests} requests reached the target, upstream bytes ${fmt(written1)} (target ≤ 4 MiB), RSS ${fmt(rss0)} → ${fmt(rss1)} (+${fmt(rss1 - rss0)}, target ≤ 32 MiB)`,
      );
      for (const c of never) c.socket.destroy();
      await poll(() => target.inFlight === 0, { timeoutMs: 10_000 });
    }
    if (only === undefined || only.has(2)) {
      // 2. A maxConnections: 2 user pipelining 100 GETs on each of 4 connections (reading).
      await makeUser('abuse_cap2', { maxConnections: 2 });
      target.reset();
      const four = await Promise.all(Array.from({ length: 4 }, () => client(http, false)));
      for (const c of four) c.socket.write(get(target.port, `/obj/${OBJ}`, 'abuse_cap2').repeat(100));
      await settled(() => target.requests, 1500);
      results.maxConnections = { maxInFlight: target.maxInFlight, requestsAtTarget: target.requests };
      console.log(
        `2. maxConnections 2, 4 connections × 100 pipelined GETs: at most ${target.maxInFlight} in flight at the target (target ≤ 2), ${target.requests} requests served`,
      );
      for (const c of four) c.socket.destroy();
      await poll(() => target.inFlight === 0, { timeoutMs: 10_000 });
    }
    if (only === undefined || only.has(3)) {
      // 3. A 10 KiB/s user downloading on one connection for 22 s, plain HTTP (pipelined) and CONNECT.
      const rate = 10 * KiB;
      const rated: Record<string, unknown> = {};
      for (const way of ['http', 'connect'] as const) {
        const name = `abuse_rate_${way}`;
        await makeUser(name, { rateBytesPerSec: rate });
        const used0 = (await api<{ usedBytes: number }>(`/v1/users/${name}`)).body.usedBytes;
        const rotorRead = async (): Promise<number> => (await api<{ usedBytes: number }>(`/v1/users/${name}`)).body.usedBytes - used0;
        target.reset();
        const slow = await client(http, false);
        if (way === 'http') slow.socket.write(get(target.port, `/obj/${OBJ}`, name).repeat(500));
        else {
          slow.socket.write(`CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\n${auth(name)}\r\n`);
          await poll(() => slow.received > 0, { timeoutMs: 10_000, everyMs: 5 });
          slow.received = 0;
          slow.socket.write(get(target.port, '/stream', null));
        }
        await poll(() => target.written > 0, { timeoutMs: 10_000, everyMs: 5 });
        const t0 = Date.now();
        const up: number[] = [];
        const down: number[] = [];
        const read: number[] = [];
        // One sample a second for 22 s: the first 10 s as the issue measured them, and a steady 10-s window.
        for (let i = 0; i <= 22; i++) {
          await poll(() => Date.now() - t0 >= i * 1000, { timeoutMs: 30_000, everyMs: 20 });
          up.push(target.written);
          down.push(slow.received);
          read.push(await rotorRead());
        }
        const pct = (n: number): string => `${n >= 10 * rate ? '+' : ''}${((n / (10 * rate) - 1) * 100).toFixed(1)} %`;
        const row = {
          rate,
          rotorRead10s: read[10]!,
          rotorRead12to22s: read[22]! - read[12]!,
          upstreamFirst10s: up[10]!,
          upstream12to22s: up[22]! - up[12]!,
          delivered12to22s: down[22]! - down[12]!,
          delivered22s: down[22]!,
          bufferedAt22s: up[22]! - read[22]!,
          requestsAtTarget: target.requests,
        };
        rated[way] = row;
        console.log(
          `3. 10 KiB/s user, ${way === 'http' ? '500 pipelined GETs' : 'CONNECT, one endless GET'} on one connection: Rotor read ${fmt(row.rotorRead10s)} in the first 10 s (${pct(row.rotorRead10s)}), ` +
            `${fmt(row.rotorRead12to22s)} from 12 s to 22 s (${pct(row.rotorRead12to22s)}); the target wrote ${fmt(row.upstreamFirst10s)} in the first 10 s (${pct(row.upstreamFirst10s)}), ` +
            `${fmt(row.upstream12to22s)} from 12 s to 22 s (${pct(row.upstream12to22s)}); delivered ${fmt(row.delivered12to22s)} from 12 s to 22 s (${pct(row.delivered12to22s)}); ` +
            `held between the target and Rotor at 22 s: ${fmt(row.bufferedAt22s)}`,
        );
        slow.socket.destroy();
        await poll(() => target.inFlight === 0, { timeoutMs: 10_000 });
      }
      results.rate = rated;
    }

    if (only === undefined || only.has(4)) {
      // 4. The read-ahead gap after each way a download ends early, plain HTTP and CONNECT.
      const gaps: Array<Record<string, unknown>> = [];
      for (const way of ['http', 'connect'] as const) {
        for (const scenario of ['aborted', 'rate-limited', 'quota-cut', 'deleted-user'] as const) {
          const name = `gap_${way}_${scenario.replace('-', '_')}`;
          const extra =
            scenario === 'rate-limited'
              ? { rateBytesPerSec: 256 * KiB }
              : scenario === 'quota-cut'
                ? { quota: { bytes: 4 * MiB, period: 'total' } }
                : {};
          await makeUser(name, extra);
          target.reset();
          const c = await client(http, false);
          if (way === 'http') c.socket.write(get(target.port, '/stream', name));
          else {
            c.socket.write(`CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\n${auth(name)}\r\n`);
            await poll(() => c.received > 0, { timeoutMs: 10_000, everyMs: 5 });
            c.received = 0;
            c.socket.write(get(target.port, '/stream', null));
          }
          const until = scenario === 'rate-limited' ? 512 * KiB : 2 * MiB;
          await poll(() => c.received >= until, { timeoutMs: 30_000, everyMs: 5 });
          if (scenario === 'aborted' || scenario === 'rate-limited') c.socket.destroy();
          else if (scenario === 'deleted-user') await api(`/v1/users/${name}`, 'DELETE');
          await c.closed;
          const upstream = await settled(() => target.written, 500);
          await poll(() => target.inFlight === 0, { timeoutMs: 10_000 });
          // The connection's final record: a checkpoint of a connection still closing (result 'open') carries the
          // bytes of the last checkpoint, not the ones delivered since.
          const rec = await poll(
            async () =>
              (
                await api<{ items: Array<{ bytesDown: number; result: string; target?: string }> }>(`/v1/connections?user=${name}&limit=5`)
              ).body.items.find((i) => i.target?.endsWith(`:${target.port}`) && i.bytesDown > 1000 && i.result !== 'open'),
            { timeoutMs: 10_000, everyMs: 100 },
          );
          const row = {
            way,
            scenario,
            clientReceived: c.received,
            rotorRead: rec.bytesDown,
            upstreamBytes: upstream,
            rotorGap: rec.bytesDown - c.received,
            upstreamGap: upstream - c.received,
          };
          gaps.push(row);
          console.log(
            `4. ${way.padEnd(7)} ${scenario.padEnd(12)} client ${fmt(c.received).padStart(10)}  Rotor read ${fmt(rec.bytesDown).padStart(10)} (gap ${fmt(row.rotorGap)})  upstream ${fmt(upstream).padStart(10)} (gap ${fmt(row.upstreamGap)})`,
          );
        }
      }
      results.gaps = gaps;
    }
  } finally {
    await target.close();
    if (rotor) await rotor.stop('SIGTERM', 20_000);
    rmSync(dir, { recursive: true, force: true });
  }
  if (jsonFile) writeFileSync(jsonFile, JSON.stringify(results, null, 2));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
