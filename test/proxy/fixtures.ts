// Real loopback servers and small in-test implementations of the gateway's seams, shared by the proxy tests.
import type { Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { PoolEmptyError, type FailureReason, type NodeSource, type PoolKey, type UpstreamNode } from '../../src/pool/types.ts';
import { Router } from '../../src/proxy/router.ts';
import type { LocalUser, PoolProvider, SessionStore, UserDirectory } from '../../src/proxy/types.ts';
import type { Metrics } from '../../src/telemetry/metrics.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { runCurl } from '../support/curl.ts';
import { startHttpTarget } from '../support/target.ts';

export function listenPort(server: Server | HttpServer): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

export function closeServer(server: Server | HttpServer): Promise<void> {
  return new Promise((resolve) => {
    (server as HttpServer).closeAllConnections?.();
    server.close(() => resolve());
  });
}

export { freePort as deadPort } from '../support/ports.ts';

/** The loopback target (test/support/target.ts): /hello, /bytes/<n> paced by the client's reads, POST /echo. */
export const startTarget = startHttpTarget;

/** A server that accepts connections and never says a word. */
export async function startSilent(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  });
  const port = await listenPort(server);
  return {
    port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await closeServer(server);
    },
  };
}

export { startMicrosocks, startSquid, startTinyproxy } from '../support/upstreams.ts';
export type { UpstreamDaemon as Child } from '../support/upstreams.ts';

export function node(protocol: 'socks5' | 'http', port: number, username?: string, password?: string): UpstreamNode {
  return {
    id: `${protocol}://${username ?? ''}@127.0.0.1:${port}`,
    protocol,
    host: '127.0.0.1',
    port,
    source: 'pwd',
    ...(username !== undefined ? { username } : {}),
    ...(password !== undefined ? { password } : {}),
  };
}

/** A fixed list of nodes handed out in order (the pool is not what these tests test); records what it is told. */
export class FixedPool implements NodeSource {
  next = 0;
  readonly failures: Array<{ id: string; reason: FailureReason }> = [];
  readonly successes: string[] = [];
  released = 0;
  acquired = 0;
  constructor(public nodes: UpstreamNode[]) {}
  async acquire(exclude?: ReadonlySet<string>): Promise<UpstreamNode> {
    for (let i = 0; i < this.nodes.length; i++) {
      const n = this.nodes[(this.next + i) % this.nodes.length]!;
      if (exclude?.has(n.id)) continue;
      this.next = (this.next + i + 1) % this.nodes.length;
      this.acquired++;
      return n;
    }
    throw new PoolEmptyError('fixed', 'every node excluded');
  }
  release(): void {
    this.released++;
  }
  reportFailure(n: UpstreamNode, reason: FailureReason): void {
    this.failures.push({ id: n.id, reason });
  }
  reportSuccess(n: UpstreamNode): void {
    this.successes.push(n.id);
  }
  isUsable(n: UpstreamNode): boolean {
    return !this.failures.some((f) => f.id === n.id);
  }
}

export class FixedPools implements PoolProvider {
  readonly keys: PoolKey[] = [];
  constructor(readonly source: NodeSource) {}
  pool(key: PoolKey): NodeSource {
    this.keys.push(key);
    return this.source;
  }
}

export class MapSessions implements SessionStore {
  readonly map = new Map<string, UpstreamNode>();
  readonly rotations: string[] = [];
  get(user: string, id: string): { node: UpstreamNode } | undefined {
    const n = this.map.get(`${user}/${id}`);
    return n ? { node: n } : undefined;
  }
  bind(user: string, id: string, n: UpstreamNode): void {
    this.map.set(`${user}/${id}`, n);
  }
  rotate(user: string, id: string, reason: string): void {
    this.rotations.push(`${user}/${id}:${reason}`);
    this.map.delete(`${user}/${id}`);
  }
}

export function user(name: string, password: string, extra: Partial<LocalUser> = {}): LocalUser {
  return { name, password, mainAccount: 'shop1', product: 'p1', draw: 'pwd', sessTime: 5, limitBytes: -1, ...extra };
}

export class Users implements UserDirectory {
  private readonly map: Map<string, LocalUser>;
  constructor(list: LocalUser[]) {
    this.map = new Map(list.map((u) => [u.name, u]));
  }
  get(name: string): LocalUser | undefined {
    return this.map.get(name);
  }
}

/** Runs curl; resolves with its exit code, stdout and stderr (never rejects on a non-zero exit). */
export async function curl(args: string[], timeoutMs = 15_000): Promise<{ code: number; stdout: string; stderr: string }> {
  const r = await runCurl(args, { maxTimeS: Math.ceil(timeoutMs / 1000) });
  return { code: r.exitCode, stdout: r.stdout, stderr: r.stderr };
}

/** A router with one user (alice / alice-pass), unlimited meters and a pool with no node: for listener-level tests. */
export function routerWithoutNodes(metrics?: Metrics): Router {
  return new Router({
    users: new Users([user('alice', 'alice-pass')]),
    meters: new UnlimitedMeters(),
    pools: new FixedPools(new FixedPool([])),
    sessions: new MapSessions(),
    ...(metrics ? { metrics } : {}),
  });
}
