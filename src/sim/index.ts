// The sandbox platform: the whole Open API v2 over HTTP with the real envelope, asynchronous orders with
// callbacks, dynamic accounts and balances, and (by default) real loopback upstream proxies that meter
// traffic against those balances. `startSimulator()` is what `rotor sim`, embedded mode and the tests use.
import type { Upstreams } from './contracts.ts';
import { createAuthority } from './platform/authority.ts';
import { CallbackSender } from './platform/callbacks.ts';
import { SIM_PRODUCTS } from './platform/catalog.ts';
import { createClock, type SimClock } from './platform/clock.ts';
import type { SimContext } from './platform/context.ts';
import { createFaultControl, createInspect, type FaultControl, type Inspect } from './platform/control.ts';
import { Faults } from './platform/faults.ts';
import { rememberSandbox, type PersistOptions, type SandboxMemory } from './platform/persist.ts';
import { startServer } from './platform/server.ts';
import { SimState } from './platform/state.ts';
import { startUpstreams } from './upstreams/index.ts';

export { SIM_PRODUCTS } from './platform/catalog.ts';
export type { Inspect, FaultControl, ProductPatch, MerchantPatch } from './platform/control.ts';
export type { FaultSettings, OrderOutcome } from './platform/faults.ts';
export type { CallbackRecord } from './platform/callbacks.ts';
export { createClock, type SimClock } from './platform/clock.ts';
export { sandboxStateFile } from './platform/persist.ts';

/** Fixed development credentials (the secret is 32 bytes: AES-256), for config/default.yaml. */
export const SIM_DEFAULTS = {
  appKey: 'rotor-sandbox-app-key',
  appSecret: 'rotor-sandbox-secret-0123456789a',
  products: SIM_PRODUCTS,
} as const;

export interface SimOptions {
  /** default 127.0.0.1 */
  host?: string;
  /** default 0 (a free port) */
  port?: number;
  appKey?: string;
  /** 16, 24 or 32 bytes */
  appSecret?: string;
  /** where callbacks go (setCallbackUrl changes it later) */
  callbackUrl?: string;
  /** platform-clock speed (platform seconds per real second), or a clock of your own */
  clock?: { speed?: number } | SimClock;
  /** platform time from acceptance to an order's final state; default 2000 (processing at half) */
  orderDelayMs?: number;
  /** first callback retry after this much platform time, doubling; default 1000 */
  callbackBackoffMs?: number;
  /** start the loopback upstream proxies; default true */
  upstreams?: boolean;
  /** password-gateway ports; default 4 */
  gatewayPorts?: number;
  /** seeds generated names, passwords and tokens; default 1 */
  seed?: number;
  /**
   * Per productNo, proxy strings (`http://host:port`, `socks5://user:pass@host:port`) DrawByPwd hands out
   * instead of the sandbox's own gateways, round robin: a benchmark's upstreams drawn like real lines.
   */
  drawnLines?: Record<string, string[]>;
  /** Products whose DrawByPwd answers like a backconnect gateway (faults.ts `backconnect`); POST /sim/faults changes it. */
  backconnect?: string[];
  /** Every call on the seed's paths waits this long before it is handled (a far or slow platform); default 0. */
  latencyMs?: number;
  /** A JSON file the sandbox's state is read from at start and kept written to (persist.ts); absent: memory only. */
  stateFile?: string;
  /** When the state file is written (persist.ts); the defaults suit a daemon. */
  statePersist?: PersistOptions;
}

/** A type (not an interface) so it is assignable to Record<string, unknown> (src/cli/simulator.ts). */
export type Simulator = {
  baseUrl: string;
  appKey: string;
  appSecret: string;
  host: string;
  port: number;
  upstreams: Upstreams | null;
  clock: SimClock;
  inspect: Inspect;
  faults: FaultControl;
  setCallbackUrl(url: string): void;
  /** Writes of the state file so far (0 without one; the write at close not counted). */
  stateWrites(): number;
  /** Resolves once no write of the state file is under way (its count then includes what the file shows). */
  stateSettled(): Promise<void>;
  close(): Promise<void>;
};

function isClock(c: SimOptions['clock']): c is SimClock {
  return typeof c === 'object' && c !== null && typeof (c as SimClock).now === 'function';
}

export async function startSimulator(opts: SimOptions = {}): Promise<Simulator> {
  const host = opts.host ?? '127.0.0.1';
  const appKey = opts.appKey ?? SIM_DEFAULTS.appKey;
  const appSecret = opts.appSecret ?? SIM_DEFAULTS.appSecret;
  const clock = isClock(opts.clock) ? opts.clock : createClock({ speed: opts.clock?.speed ?? 1 });
  const state = new SimState(opts.seed ?? 1, opts.callbackUrl ?? '');
  const callbacks = new CallbackSender(clock, () => state.merchant.callbackUrl, opts.callbackBackoffMs ?? 1000);
  let baseUrl = '';
  const ctx: SimContext = {
    state,
    clock,
    callbacks,
    faults: new Faults(() => state.random(), {
      ...(opts.backconnect ? { backconnect: opts.backconnect } : {}),
      ...(opts.latencyMs !== undefined ? { latencyMs: opts.latencyMs } : {}),
    }),
    calls: new Map(),
    upstreams: null,
    orderDelayMs: opts.orderDelayMs ?? 2000,
    baseUrl: () => baseUrl,
    ...(opts.drawnLines ? { drawnLines: new Map(Object.entries(opts.drawnLines)) } : {}),
  };
  if (opts.upstreams !== false) {
    ctx.upstreams = await startUpstreams({
      authority: createAuthority(ctx),
      host,
      gatewayPorts: opts.gatewayPorts ?? 4,
      now: () => clock.now(),
    });
  }
  const inspect = createInspect(ctx);
  const faults = createFaultControl(ctx);
  let server;
  let memory: SandboxMemory | undefined;
  try {
    if (opts.stateFile) memory = await rememberSandbox(ctx, opts.stateFile, opts.statePersist);
    server = await startServer({ host, port: opts.port ?? 0, appKey, appSecret, ctx, inspect, faults });
  } catch (err) {
    await memory?.close();
    await ctx.upstreams?.close();
    throw err;
  }
  baseUrl = `http://${host.includes(':') ? `[${host}]` : host}:${server.port}`;
  // Instances whose saved port was taken at the load: told to the merchant by an instance callback (seed part
  // 6: "an instance changes"), as soon as its callback address is known.
  for (const no of memory?.moved ?? []) callbacks.sendWhenAddressed('instance', no, '');
  let closed = false;
  return {
    baseUrl,
    appKey,
    appSecret,
    host,
    port: server.port,
    upstreams: ctx.upstreams,
    clock,
    inspect,
    faults,
    setCallbackUrl(url: string) {
      state.merchant.callbackUrl = url;
      callbacks.flushDeferred();
    },
    stateWrites: () => memory?.writes ?? 0,
    stateSettled: async () => {
      await memory?.settled();
    },
    async close() {
      if (closed) return;
      closed = true;
      await memory?.close();
      callbacks.close();
      if (!isClock(opts.clock)) clock.stop();
      await server.close();
      await ctx.upstreams?.close();
    },
  };
}
