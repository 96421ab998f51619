// `npm run soak` (issue 9, item 5): a bounded soak on loopback. The daemon (with its embedded sandbox) runs in
// this process; an echo target and the load client are forked children, so each process stays under the
// descriptor limit. The client holds N tunnels (SOCKS5 and HTTP CONNECT; rotating and sticky users mixed)
// that keep echoing, plus idle connections that never finish a handshake (reopened when Rotor closes them at
// the handshake timeout). Prints connections held, errors by kind, throughput, RSS and open descriptors
// before/peak/after, and writes them to docs/reliability.md with the command that produced them.
//
//   npm run soak -- [--tunnels N] [--idle N] [--hold SECONDS] [--interval MS] [--chunk BYTES] [--no-doc]
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = dirname(fileURLToPath(import.meta.url));
const DOC = join(HERE, '..', 'docs', 'reliability.md');
/** Hard bound on the whole run. */
const BOUND_MS = 10 * 60_000;

interface ClientReport {
  held: number;
  peakHeld: number;
  opened: number;
  errors: Record<string, number>;
  bytes: number;
  openMsP50: number;
  openMsP99: number;
  idleHeld: number;
  idleReopened: number;
  idleRefusedOrOther: number;
}

function fdLimit(): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    return Number(line?.split(/\s+/)[3] ?? 1024);
  } catch {
    return 1024;
  }
}

const openFds = (): number => {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return -1;
  }
};
const rssMb = (): number => Math.round(process.memoryUsage().rss / 1048576);

// ---------------------------------------------------------------------------------------------- children
async function runEcho(): Promise<void> {
  const server = createServer({ noDelay: true }, (s) => {
    s.on('error', () => {});
    s.pipe(s);
  });
  server.maxConnections = 100_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', 4096, r));
  process.send!({ port: (server.address() as { port: number }).port });
  process.on('message', (m: { stop?: boolean }) => {
    if (m.stop) process.exit(0);
  });
}

async function runClient(): Promise<void> {
  const { openTunnel, echoRound, percentile } = await import('../test/reliability/clients.ts');
  const { connect } = await import('node:net');
  const cfg = JSON.parse(process.argv[3]!) as {
    socks5: number;
    http: number;
    echo: number;
    tunnels: number;
    idle: number;
    intervalMs: number;
    chunk: number;
    users: Array<{ name: string; password: string }>;
  };
  const errors: Record<string, number> = {};
  const err = (k: string): void => void (errors[k] = (errors[k] ?? 0) + 1);
  const tunnels = new Set<Socket>();
  const openMs: number[] = [];
  let bytes = 0;
  let peakHeld = 0;
  let opened = 0;
  let stopping = false;
  const payload = Buffer.alloc(cfg.chunk, 0x61);

  // Idle connections: SOCKS5 half sends one byte of a greeting, HTTP half half a request line; never more.
  const idle = new Set<Socket>();
  let idleReopened = 0;
  let idleOther = 0;
  const openIdle = (i: number): void => {
    if (stopping) return;
    const s = connect({ host: '127.0.0.1', port: i % 2 === 0 ? cfg.socks5 : cfg.http });
    idle.add(s);
    s.on('connect', () => s.write(i % 2 === 0 ? Buffer.from([5]) : 'CONNECT 127.0.0.1'));
    s.on('data', () => idleOther++);
    s.on('error', () => {});
    s.on('close', () => {
      idle.delete(s);
      if (stopping) return;
      idleReopened++;
      setTimeout(() => openIdle(i), 10);
    });
  };
  for (let i = 0; i < cfg.idle; i++) openIdle(i);

  // Tunnels: one in three sticky (200 sessions), the rest rotating; SOCKS5 and HTTP alternate.
  const openOne = async (i: number): Promise<void> => {
    const u = cfg.users[i % cfg.users.length]!;
    const user = i % 3 === 0 ? `${u.name}-session-soak${i % 200}` : u.name;
    const kind = i % 2 === 0 ? 'socks5' : 'http';
    try {
      const t = await openTunnel(kind, kind === 'socks5' ? cfg.socks5 : cfg.http, user, u.password, cfg.echo, 30_000);
      openMs.push(t.ms);
      opened++;
      tunnels.add(t.socket);
      peakHeld = Math.max(peakHeld, tunnels.size);
      const s = t.socket;
      s.on('error', () => {});
      s.once('close', () => {
        tunnels.delete(s);
        if (!stopping) err('tunnel_closed_by_peer');
      });
      // Traffic: one chunk per interval, each waits for its echo (so the loop stays bounded).
      const loop = async (): Promise<void> => {
        while (!stopping && !s.destroyed) {
          await new Promise((r) => setTimeout(r, cfg.intervalMs * (0.5 + Math.random())));
          if (stopping || s.destroyed) return;
          try {
            await echoRound(s, payload, 30_000);
            bytes += payload.length * 2;
          } catch (e) {
            if (!stopping) err((e as { kind?: string }).kind ?? 'echo_error');
            s.destroy();
            return;
          }
        }
      };
      void loop();
    } catch (e) {
      err((e as { kind?: string }).kind ?? 'open_error');
    }
  };
  const width = 200;
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < cfg.tunnels) await openOne(next++);
    }),
  );
  process.send!({ ramped: true, held: tunnels.size });

  const report = (): ClientReport => {
    const sorted = [...openMs].sort((a, b) => a - b);
    return {
      held: tunnels.size,
      peakHeld,
      opened,
      errors,
      bytes,
      openMsP50: percentile(sorted, 50),
      openMsP99: percentile(sorted, 99),
      idleHeld: idle.size,
      idleReopened,
      idleRefusedOrOther: idleOther,
    };
  };
  process.on('message', (m: { report?: boolean; stop?: boolean }) => {
    if (m.report) process.send!({ report: report() });
    if (m.stop) {
      const final = report();
      stopping = true;
      for (const s of tunnels) s.destroy();
      for (const s of idle) s.destroy();
      process.send!({ final }, () => setTimeout(() => process.exit(0), 100));
    }
  });
}

// ---------------------------------------------------------------------------------------------- parent
function child(role: string, arg?: string): ChildProcess {
  return fork(fileURLToPath(import.meta.url), [role, ...(arg ? [arg] : [])], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

function next<T>(c: ChildProcess, key: string, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`child did not send '${key}' within ${timeoutMs} ms`)), timeoutMs);
    const on = (m: Record<string, unknown>): void => {
      if (key in m) {
        clearTimeout(t);
        c.off('message', on);
        resolve((key === 'ramped' || key === 'port' ? m : m[key]) as T);
      }
    };
    c.on('message', on);
  });
}

async function main(): Promise<void> {
  const started = Date.now();
  const bound = setTimeout(() => {
    console.error('soak: exceeded its 10-minute bound; aborting');
    process.exit(1);
  }, BOUND_MS);
  bound.unref();

  const limit = fdLimit();
  // The daemon process holds about two descriptors per tunnel on Rotor's side and two on the embedded
  // sandbox gateway's side, plus one per idle connection.
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      tunnels: { type: 'string' },
      idle: { type: 'string', default: '1000' },
      hold: { type: 'string', default: '60' },
      interval: { type: 'string', default: '2000' },
      chunk: { type: 'string', default: '1024' },
      'no-doc': { type: 'boolean', default: false },
    },
  });
  const idleCount = Number(values.idle);
  const fit = Math.floor((limit - idleCount - 1500) / 4);
  const tunnels = Math.max(1, Math.min(values.tunnels ? Number(values.tunnels) : 5000, fit));
  if (values.tunnels && Number(values.tunnels) > fit)
    console.log(`soak: --tunnels ${values.tunnels} lowered to ${fit} (descriptor limit ${limit})`);
  const holdS = Number(values.hold);
  const intervalMs = Number(values.interval);
  const chunk = Number(values.chunk);
  const command = process.argv.length > 2 ? `npm run soak -- ${process.argv.slice(2).join(' ')}` : 'npm run soak';

  const { parseConfig } = await import('../src/config/index.ts');
  const { startDaemon } = await import('../src/main.ts');
  const { createLogger } = await import('../src/telemetry/logger.ts');
  const dir = mkdtempSync(join(tmpdir(), 'rotor-soak-'));
  const users = [
    { name: 'alice', password: 'alice-pass', mainAccount: 'shop1' },
    { name: 'carol', password: 'carol-pass', mainAccount: 'shop1' },
  ];
  const config = parseConfig(
    {
      platform: { mode: 'embedded' },
      proxy: { http: { host: '127.0.0.1', port: 0 }, socks5: { host: '127.0.0.1', port: 0 }, handshakeTimeoutMs: 10_000 },
      admin: { host: '127.0.0.1', port: 0 },
      callback: { host: '127.0.0.1', port: 0 },
      store: { path: join(dir, 'rotor.db') },
      log: { level: 'silent' },
      pool: { drawBatch: 10, strategy: 'least_connections' },
      users,
    },
    { env: {} },
  );
  const rss = { before: 0, peak: 0, after: 0 };
  const fds = { before: 0, peak: 0, after: 0 };
  const daemon = await startDaemon(config, { logger: createLogger({ level: 'silent' }), sim: { orderDelayMs: 100, gatewayPorts: 10 } });
  const echo = child('echo');
  const { port: echoPort } = await next<{ port: number }>(echo, 'port', 30_000);
  await new Promise((r) => setTimeout(r, 1000));
  rss.before = rss.peak = rssMb();
  fds.before = fds.peak = openFds();
  const sampler = setInterval(() => {
    rss.peak = Math.max(rss.peak, rssMb());
    fds.peak = Math.max(fds.peak, openFds());
  }, 500);

  console.log(
    `soak: ${tunnels} tunnels, ${idleCount} idle, hold ${holdS} s, ${chunk} B every ~${intervalMs} ms per tunnel (fd limit ${limit})`,
  );
  const client = child(
    'client',
    JSON.stringify({
      socks5: daemon.ports.socks5,
      http: daemon.ports.http,
      echo: echoPort,
      tunnels,
      idle: idleCount,
      intervalMs,
      chunk,
      users,
    }),
  );
  const rampStart = Date.now();
  await next(client, 'ramped', BOUND_MS);
  const rampS = (Date.now() - rampStart) / 1000;
  console.log(`soak: ramped in ${rampS.toFixed(1)} s; holding ${holdS} s`);
  const bytesAt = (
    await (async () => {
      client.send({ report: true });
      return next<ClientReport>(client, 'report', 30_000);
    })()
  ).bytes;
  const holdStart = Date.now();
  for (let s = 0; s < holdS; s += 10) {
    await new Promise((r) => setTimeout(r, Math.min(10, holdS - s) * 1000));
    client.send({ report: true });
    const r = await next<ClientReport>(client, 'report', 30_000);
    console.log(
      `soak: t+${Math.round((Date.now() - holdStart) / 1000)} s held ${r.held} idle ${r.idleHeld} rss ${rssMb()} MB fds ${openFds()} errors ${JSON.stringify(r.errors)}`,
    );
  }
  const activeDuring = await gauge(daemon);
  client.send({ stop: true });
  const final = await next<ClientReport>(client, 'final', 60_000);
  const holdSeconds = (Date.now() - holdStart) / 1000;
  const throughputMBs = (final.bytes - bytesAt) / holdSeconds / 1048576;

  // After the load: descriptors and gauges back to where they were.
  let settled = false;
  for (let i = 0; i < 120 && !settled; i++) {
    await new Promise((r) => setTimeout(r, 500));
    const g = await gauge(daemon);
    settled = g.http + g.socks5 === 0 && openFds() <= fds.before + 20;
  }
  clearInterval(sampler);
  (globalThis as { gc?: () => void }).gc?.();
  rss.after = rssMb();
  fds.after = openFds();
  const activeAfter = await gauge(daemon);
  echo.send({ stop: true });
  await daemon.close();
  rmSync(dir, { recursive: true, force: true });

  const result = {
    command,
    when: new Date().toISOString(),
    fdLimit: limit,
    tunnelsAsked: tunnels,
    idle: idleCount,
    holdSeconds: Math.round(holdSeconds),
    rampSeconds: Number(rampS.toFixed(1)),
    heldAtEnd: final.held,
    peakHeld: final.peakHeld,
    opened: final.opened,
    openMsP50: Number(final.openMsP50.toFixed(1)),
    openMsP99: Number(final.openMsP99.toFixed(1)),
    idleHeldAtEnd: final.idleHeld,
    idleClosedByRotorAndReopened: final.idleReopened,
    idleAnswered: final.idleRefusedOrOther,
    errors: final.errors,
    throughputMBs: Number(throughputMBs.toFixed(2)),
    rssMb: rss,
    fds,
    activeDuring,
    activeAfter,
    settled,
    totalSeconds: Math.round((Date.now() - started) / 1000),
  };
  console.log(JSON.stringify(result, null, 2));
  if (!values['no-doc']) writeDoc(result);
  process.exit(settled ? 0 : 1);
}

async function gauge(daemon: {
  metrics: {
    registry: {
      getSingleMetric(n: string): { get(): Promise<{ values: Array<{ labels: Record<string, unknown>; value: number }> }> } | undefined;
    };
  };
}): Promise<{ http: number; socks5: number }> {
  const m = await daemon.metrics.registry.getSingleMetric('rotor_proxy_connections_active')?.get();
  const v = (l: string): number => m?.values.find((x) => x.labels.listener === l)?.value ?? 0;
  return { http: v('http'), socks5: v('socks5') };
}

const BEGIN = '<!-- soak:begin -->';
const END = '<!-- soak:end -->';

function writeDoc(
  r: Record<string, unknown> & { errors: Record<string, number>; rssMb: Record<string, number>; fds: Record<string, number> },
): void {
  const errorKinds = Object.entries(r.errors);
  const block = [
    BEGIN,
    `Last run: \`${String(r.command)}\` at ${String(r.when)} (${String(r.totalSeconds)} s in all).`,
    '',
    '| figure | value |',
    '|---|---|',
    `| descriptor limit (\`ulimit -n\`) | ${String(r.fdLimit)} |`,
    `| tunnels asked / opened / peak held / held at the end | ${String(r.tunnelsAsked)} / ${String(r.opened)} / ${String(r.peakHeld)} / ${String(r.heldAtEnd)} |`,
    `| ramp-up (200 opening at a time) | ${String(r.rampSeconds)} s; tunnel open p50 ${String(r.openMsP50)} ms, p99 ${String(r.openMsP99)} ms |`,
    `| idle connections (never finish a handshake) held at the end | ${String(r.idleHeldAtEnd)} of ${String(r.idle)}; closed by Rotor at the handshake timeout and reopened: ${String(r.idleClosedByRotorAndReopened)}; answered with bytes: ${String(r.idleAnswered)} |`,
    `| errors by kind | ${errorKinds.length === 0 ? 'none' : errorKinds.map(([k, n]) => `${k}: ${n}`).join(', ')} |`,
    `| echo throughput while holding (both directions) | ${String(r.throughputMBs)} MB/s over ${String(r.holdSeconds)} s |`,
    `| RSS of the daemon process before / peak / after | ${r.rssMb.before} / ${r.rssMb.peak} / ${r.rssMb.after} MB |`,
    `| open descriptors of the daemon process before / peak / after | ${r.fds.before} / ${r.fds.peak} / ${r.fds.after} |`,
    `| rotor_proxy_connections_active during / after | ${JSON.stringify(r.activeDuring)} / ${JSON.stringify(r.activeAfter)} |`,
    `| back to baseline after the load (gauges 0, descriptors within 20) | ${r.settled ? 'yes' : 'NO'} |`,
    END,
  ].join('\n');
  let text = '';
  try {
    text = readFileSync(DOC, 'utf8');
  } catch {
    text = '';
  }
  const a = text.indexOf(BEGIN);
  const b = text.indexOf(END);
  text = a >= 0 && b > a ? text.slice(0, a) + block + text.slice(b + END.length) : `${text}\n## Soak figures\n\n${block}\n`;
  writeFileSync(DOC, text);
  console.log(`soak: figures written to ${DOC}`);
}

const role = process.argv[2];
if (role === 'echo') void runEcho();
else if (role === 'client') void runClient();
else
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
