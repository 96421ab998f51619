// The load client for M2–M5, run as a child process (forked with IPC by bench/run.ts) so it does not share
// an event loop with the driver or the gateway. Plain sockets and hand-written CONNECT / SOCKS5 handshakes:
// the client must cost the same on both paths and as little as possible.
import { connect, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

export interface ProxySpec {
  kind: 'connect' | 'socks5';
  port: number;
  username: string;
  password: string;
}

export type ClientJob =
  /** M2: tunnels opened, used for one small request and closed, per second, `concurrency` at a time. */
  | { op: 'rate'; proxy: ProxySpec; target: number; concurrency: number; durationMs: number }
  /**
   * M2 at an offered rate: a new tunnel every 1/perSecond s (open loop), at most `concurrency` in flight. Every
   * gateway then carries the same tunnels per second, so CPU per tunnel compares the work, not how much a faster
   * gateway saves per tunnel by handling more of them per wake-up.
   */
  | { op: 'paced'; proxy: ProxySpec; target: number; perSecond: number; concurrency: number; durationMs: number }
  /** M3: `bytes` downloaded through one tunnel. */
  | { op: 'bulk'; proxy: ProxySpec; target: number; bytes: number }
  /** M4: `count` fresh tunnels one after another, each timed from connect to the end of the response. */
  | { op: 'latency'; proxy: ProxySpec; target: number; count: number }
  /** M5, first half: open `count` tunnels and keep them idle. */
  | { op: 'hold'; proxy: ProxySpec; target: number; count: number; concurrency: number }
  /** M5, second half: one request on every held tunnel, then close them all. */
  | { op: 'use'; concurrency: number };

export interface RateResult {
  completed: number;
  errors: number;
  seconds: number;
  perSecond: number;
  /** paced: tunnels started more than 5 ms after their slot (`concurrency` in flight: the gateway fell behind) */
  late?: number;
}
export interface BulkResult {
  bytes: number;
  seconds: number;
  mibPerSecond: number;
}
export interface LatencyResult {
  count: number;
  errors: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
}
export interface HoldResult {
  held: number;
  errors: number;
}
export interface UseResult {
  ok: number;
  failed: number;
}

export type ClientReply = { ok: true; result: unknown } | { ok: false; error: string };

class TunnelError extends Error {
  readonly code = 'BENCH_TUNNEL';
}

const SOCKS_GREETING = Buffer.from([5, 1, 2]);

/** Connects to the proxy and completes the handshake; resolves with the socket, now a pipe to the target. */
export function openTunnel(proxy: ProxySpec, targetPort: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: proxy.port });
    socket.setNoDelay(true);
    let buffer: Buffer | null = null;
    let step = 0;
    const fail = (message: string): void => {
      socket.destroy();
      reject(new TunnelError(message));
    };
    const done = (): void => {
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      resolve(socket);
    };
    const onError = (err: NodeJS.ErrnoException): void => fail(`proxy ${proxy.port}: ${err.code ?? err.message}`);
    const onClose = (): void => fail(`proxy ${proxy.port} closed during the handshake`);
    const onData = (chunk: Buffer): void => {
      buffer = buffer ? Buffer.concat([buffer, chunk]) : chunk;
      if (proxy.kind === 'connect') {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const status = buffer.toString('latin1', 9, 12);
        if (status !== '200') return fail(`CONNECT answered ${buffer.toString('latin1', 0, Math.min(60, end))}`);
        if (buffer.length > end + 4) socket.unshift(buffer.subarray(end + 4));
        return done();
      }
      // SOCKS5: method choice (2 bytes), auth status (2), CONNECT reply (10 for IPv4).
      const need = step === 2 ? 10 : 2;
      if (buffer.length < need) return;
      const msg = buffer;
      buffer = msg.length > need ? msg.subarray(need) : null;
      if (step === 0) {
        if (msg[1] !== 2) return fail('SOCKS5 proxy refused user/password auth');
        const u = Buffer.from(proxy.username);
        const p = Buffer.from(proxy.password);
        socket.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
        step = 1;
      } else if (step === 1) {
        if (msg[1] !== 0) return fail('SOCKS5 proxy refused the credentials');
        socket.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, targetPort >> 8, targetPort & 0xff]));
        step = 2;
      } else {
        if (msg[1] !== 0) return fail(`SOCKS5 CONNECT reply ${msg[1]}`);
        if (buffer) socket.unshift(buffer);
        return done();
      }
    };
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);
    socket.once('connect', () => {
      if (proxy.kind === 'connect') {
        const auth = Buffer.from(`${proxy.username}:${proxy.password}`).toString('base64');
        socket.write(
          `CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`,
        );
      } else {
        socket.write(SOCKS_GREETING);
      }
    });
  });
}

/**
 * Sends GET `path` on an open tunnel and resolves once the whole body (Content-Length) is in, with its
 * length. Does not close the socket.
 */
export function request(socket: Socket, targetPort: number, path: string, close: boolean, timeoutMs = 30_000): Promise<number> {
  return new Promise((resolve, reject) => {
    let header: Buffer | null = null;
    let bodyLeft = -1;
    let bodyLength = 0;
    // Bounded: a tunnel that never answers fails its operation instead of holding the whole run.
    const timer = setTimeout(() => finish(new TunnelError(`no complete response within ${timeoutMs} ms`)), timeoutMs);
    const finish = (err?: Error): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      if (err) reject(err);
      else resolve(bodyLength);
    };
    const onError = (err: NodeJS.ErrnoException): void => finish(new TunnelError(`tunnel failed: ${err.code ?? err.message}`));
    const onClose = (): void => finish(new TunnelError('tunnel closed before the response was complete'));
    const onData = (chunk: Buffer): void => {
      if (bodyLeft < 0) {
        header = header ? Buffer.concat([header, chunk]) : chunk;
        const end = header.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = header.toString('latin1', 0, end);
        if (!head.startsWith('HTTP/1.1 200')) return finish(new TunnelError(`target answered ${head.slice(0, 40)}`));
        const m = /\r\ncontent-length: *(\d+)/i.exec(head);
        if (!m) return finish(new TunnelError('target answered without Content-Length'));
        bodyLength = Number(m[1]);
        bodyLeft = bodyLength - (header.length - end - 4);
        header = null;
      } else {
        bodyLeft -= chunk.length;
      }
      if (bodyLeft <= 0) finish();
    };
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nConnection: ${close ? 'close' : 'keep-alive'}\r\n\r\n`);
  });
}

async function oneTunnel(proxy: ProxySpec, target: number): Promise<void> {
  const socket = await openTunnel(proxy, target);
  try {
    await request(socket, target, '/small', true);
  } finally {
    socket.destroy();
  }
}

async function rate(job: Extract<ClientJob, { op: 'rate' }>): Promise<RateResult> {
  const started = performance.now();
  const until = started + job.durationMs;
  let completed = 0;
  let errors = 0;
  const worker = async (): Promise<void> => {
    while (performance.now() < until) {
      try {
        await oneTunnel(job.proxy, job.target);
        completed++;
      } catch {
        errors++;
        if (errors > 1000) return;
      }
    }
  };
  await Promise.all(Array.from({ length: job.concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { completed, errors, seconds, perSecond: completed / seconds };
}

async function paced(job: Extract<ClientJob, { op: 'paced' }>): Promise<RateResult> {
  const started = performance.now();
  const total = Math.floor((job.perSecond * job.durationMs) / 1000);
  let launched = 0;
  let inFlight = 0;
  let completed = 0;
  let errors = 0;
  let late = 0;
  await new Promise<void>((done) => {
    const settle = (): void => {
      inFlight--;
      if (launched === total && inFlight === 0) done();
      else launch();
    };
    const launch = (): void => {
      const now = performance.now();
      const due = Math.min(total, Math.floor(((now - started) * job.perSecond) / 1000) + 1);
      while (launched < due && inFlight < job.concurrency) {
        // more than 5 ms behind its slot: the timer's granularity is ~1 ms, so this is the gateway falling behind
        if (now - started - (launched * 1000) / job.perSecond > 5) late++;
        launched++;
        inFlight++;
        oneTunnel(job.proxy, job.target).then(
          () => (completed++, settle()),
          () => (errors++, settle()),
        );
      }
    };
    const tick = (): void => {
      launch();
      if (launched < total) setTimeout(tick, 1);
    };
    tick();
  });
  const seconds = (performance.now() - started) / 1000;
  return { completed, errors, seconds, perSecond: completed / seconds, late };
}

async function bulk(job: Extract<ClientJob, { op: 'bulk' }>): Promise<BulkResult> {
  const socket = await openTunnel(job.proxy, job.target);
  try {
    const started = performance.now();
    const bytes = await request(socket, job.target, `/bytes/${job.bytes}`, true);
    const seconds = (performance.now() - started) / 1000;
    return { bytes, seconds, mibPerSecond: bytes / 1024 / 1024 / seconds };
  } finally {
    socket.destroy();
  }
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

async function latency(job: Extract<ClientJob, { op: 'latency' }>): Promise<LatencyResult> {
  const times: number[] = [];
  let errors = 0;
  for (let i = 0; i < job.count; i++) {
    const started = performance.now();
    try {
      await oneTunnel(job.proxy, job.target);
      times.push(performance.now() - started);
    } catch {
      errors++;
    }
  }
  times.sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  return { count: times.length, errors, p50Ms: percentile(times, 50), p99Ms: percentile(times, 99), meanMs: mean };
}

let held: { socket: Socket; alive: boolean }[] = [];
let heldTarget = 0;

async function inBatches<T>(items: readonly T[], concurrency: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await run(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
}

async function hold(job: Extract<ClientJob, { op: 'hold' }>): Promise<HoldResult> {
  let errors = 0;
  heldTarget = job.target;
  await inBatches(Array.from({ length: job.count }), job.concurrency, async () => {
    try {
      const socket = await openTunnel(job.proxy, job.target);
      const entry = { socket, alive: true };
      socket.on('error', () => (entry.alive = false));
      socket.on('close', () => (entry.alive = false));
      held.push(entry);
    } catch {
      errors++;
    }
  });
  return { held: held.length, errors };
}

async function use(job: Extract<ClientJob, { op: 'use' }>): Promise<UseResult> {
  let ok = 0;
  let failed = 0;
  await inBatches(held, job.concurrency, async (entry) => {
    if (!entry.alive) {
      failed++;
      return;
    }
    try {
      await request(entry.socket, heldTarget, '/small', true, 5000);
      ok++;
    } catch (err) {
      if (process.env.BENCH_DEBUG) process.stderr.write(`use failed: ${(err as Error).message}\n`);
      failed++;
    }
  });
  for (const h of held) h.socket.destroy();
  held = [];
  return { ok, failed };
}

async function run(job: ClientJob): Promise<unknown> {
  switch (job.op) {
    case 'rate':
      return rate(job);
    case 'paced':
      return paced(job);
    case 'bulk':
      return bulk(job);
    case 'latency':
      return latency(job);
    case 'hold':
      return hold(job);
    case 'use':
      return use(job);
  }
}

// Only when forked as itself: a child that imports openTunnel/request has its own messages.
if (process.send && process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.on('message', (job: ClientJob) => {
    run(job).then(
      (result) => process.send!({ ok: true, result } satisfies ClientReply),
      (err: unknown) => process.send!({ ok: false, error: err instanceof Error ? err.message : String(err) } satisfies ClientReply),
    );
  });
  process.on('disconnect', () => process.exit(0));
  process.send({ ok: true, result: 'ready' } satisfies ClientReply);
}
