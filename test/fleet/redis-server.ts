// Starts a real redis-server for a test: loopback only, a free port, no persistence, in a temp dir; stopped
// (and the dir removed) by stop(). When the binary is missing, `redisMissing` says why and tests skip.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { Redis } from 'ioredis';

const BIN = process.env.ROTOR_REDIS_SERVER ?? 'redis-server';

/** Why Redis tests cannot run here (undefined when redis-server is available). */
export const redisMissing: string | undefined = (() => {
  const r = spawnSync(BIN, ['--version'], { encoding: 'utf8' });
  return r.error || r.status !== 0 ? `${BIN} not found: install the Debian package redis-server (or set ROTOR_REDIS_SERVER)` : undefined;
})();

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** One PING over a fresh socket: true when the server answers +PONG within `timeoutMs`. */
export function ping(port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    let got = '';
    const done = (ok: boolean) => {
      clearTimeout(timer);
      s.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    s.once('connect', () => s.write('PING\r\n'));
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.includes('\r\n')) done(got.startsWith('+PONG'));
    });
    s.once('error', () => done(false));
    s.once('close', () => done(false));
  });
}

export class RedisServer {
  private child: ChildProcess | undefined;
  private readonly dir = mkdtempSync(join(tmpdir(), 'rotor-redis-'));
  port = 0;

  /** `extraArgs`: more redis-server options (e.g. ['--appendonly', 'yes'], ['--rename-command', 'CONFIG', '']). */
  constructor(private readonly extraArgs: string[] = []) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts (or restarts on the same port) and resolves once it accepts connections. */
  async start(): Promise<this> {
    if (this.child) return this;
    if (this.port === 0) this.port = await freePort();
    const child = spawn(
      BIN,
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        this.dir,
        '--daemonize',
        'no',
        '--loglevel',
        'warning',
        ...this.extraArgs,
      ],
      {
        stdio: 'ignore',
      },
    );
    this.child = child;
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
    });
    const deadline = Date.now() + 5000;
    // Answering PING, not only accepting: a loading server accepts before it serves.
    while (!(await accepts(this.port)) || !(await ping(this.port))) {
      if (!this.child) throw new Error(`redis-server exited before listening on ${this.port}`);
      if (Date.now() > deadline) throw new Error(`redis-server did not listen on ${this.port} within 5 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return this;
  }

  /** Kills the server (SIGKILL: as if the host died) and waits for it to be gone. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (!child) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    await gone;
    this.child = undefined;
  }

  async stop(): Promise<void> {
    await this.kill('SIGTERM');
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A started server, or undefined when redis-server is missing. */
export async function startRedis(): Promise<RedisServer | undefined> {
  if (redisMissing) return undefined;
  return new RedisServer().start();
}

/** A connected fleet connection to `url` (close it after). */
/** A connection as a daemon holds one; a command slower than `commandTimeoutMs` counts as Redis unreachable. */
export async function connection(
  url: string,
  name = 'test',
  commandTimeoutMs = 500,
): Promise<import('../../src/store/redis-connection.ts').RedisConnection> {
  const { RedisConnection } = await import('../../src/store/redis-connection.ts');
  const c = new RedisConnection(url, { name, commandTimeoutMs, maxReconnectDelayMs: 100 });
  await c.connect();
  return c;
}

/**
 * A TCP relay in front of a Redis server on loopback: `url` once listening; `wire` decides how bytes pass
 * between a client and its upstream connection; close() stops it and its connections.
 */
export abstract class RedisRelay {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  url = '';

  constructor(private readonly port: number) {}

  async start(): Promise<this> {
    const server = createServer((client) => {
      const upstream = connect({ host: '127.0.0.1', port: this.port });
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.once('close', () => this.sockets.delete(s));
      }
      this.wire(client, upstream);
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    this.url = `redis://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    return this;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  protected abstract wire(client: Socket, upstream: Socket): void;
}

/**
 * A relay that carries at most `bytesPerSecond` each way (the source is paused for each chunk's share of a
 * second): a slow link, on which a burst of commands outlasts a command timeout that one page of them does not.
 */
export class PacedRelay extends RedisRelay {
  constructor(
    port: number,
    private readonly bytesPerSecond: number,
  ) {
    super(port);
  }

  protected wire(client: Socket, upstream: Socket): void {
    this.paced(client, upstream);
    this.paced(upstream, client);
  }

  private paced(from: Socket, to: Socket): void {
    from.on('data', (chunk: Buffer) => {
      to.write(chunk);
      from.pause();
      setTimeout(() => from.resume(), (chunk.length / this.bytesPerSecond) * 1000);
    });
    from.on('end', () => to.end());
    from.on('error', () => to.destroy());
    from.on('close', () => to.destroy());
  }
}

/** A relay that passes the client's bytes to Redis at once and keeps Redis' replies while `held` (sent on release()). */
export class HoldingRelay extends RedisRelay {
  held = false;
  private readonly kept: { to: Socket; chunk: Buffer }[] = [];

  release(): void {
    this.held = false;
    for (const { to, chunk } of this.kept.splice(0)) to.write(chunk);
  }

  protected wire(client: Socket, upstream: Socket): void {
    for (const s of [client, upstream]) s.on('error', () => undefined);
    client.on('data', (chunk: Buffer) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => (this.held ? this.kept.push({ to: client, chunk }) : client.write(chunk)));
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  }
}

/**
 * A relay that passes both ways at once and, while `counting`, counts the RESP lines (CRLFs) each way: a
 * command's arguments are two lines each ($length, value), a reply element one or two.
 */
export class CountingRelay extends RedisRelay {
  counting = false;
  requestLines = 0;
  replyLines = 0;

  protected wire(client: Socket, upstream: Socket): void {
    for (const s of [client, upstream]) s.on('error', () => undefined);
    client.on(
      'data',
      this.counter(upstream, (n) => (this.requestLines += n)),
    );
    upstream.on(
      'data',
      this.counter(client, (n) => (this.replyLines += n)),
    );
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  }

  private counter(to: Socket, add: (lines: number) => void): (chunk: Buffer) => void {
    let lastCr = false;
    return (chunk) => {
      if (this.counting) {
        let n = 0;
        for (let i = 0; i < chunk.length; i++) if (chunk[i] === 10 && (i > 0 ? chunk[i - 1] === 13 : lastCr)) n++;
        add(n);
      }
      lastCr = chunk.length > 0 && chunk[chunk.length - 1] === 13;
      to.write(chunk);
    };
  }
}

/** Calls of each Redis command since the last CONFIG RESETSTAT (INFO commandstats), read through `admin`. */
export async function commandCalls(admin: { info(section: string): Promise<string> }): Promise<Record<string, number>> {
  const info = await admin.info('commandstats');
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
  return out;
}

/**
 * A redis-server for a whole test file, started before its tests and stopped after them, with a client of
 * its own (`onAdmin` receives it once connected). Nothing is started when redis-server is missing.
 */
export function redisForFile(onAdmin: (admin: Redis) => void): RedisServer {
  const server = new RedisServer();
  let admin: Redis | undefined;
  before(async () => {
    if (redisMissing) return;
    await server.start();
    admin = new Redis(server.port, '127.0.0.1', { lazyConnect: true });
    await admin.connect();
    onAdmin(admin);
  });
  after(async () => {
    if (redisMissing) return;
    admin?.disconnect();
    await server.stop();
  });
  return server;
}
