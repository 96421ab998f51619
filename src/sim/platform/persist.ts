// The sandbox's memory across restarts (embedded mode: a file beside the daemon's store). A real platform
// remembers its accounts, balances, orders and instances whatever its merchants do; a sandbox that forgot
// them on every `npm start` left users made through the API without a sub account. The whole state is
// written as one JSON file (to a temporary name, then renamed: a crash mid-write keeps the previous file),
// every `intervalMs` when it changed, and at close; it is read back before the sandbox answers anything.
// Orders not yet final finish after the usual delay, static instances get their upstream port again (a new
// port number) and their expiry watch.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { writeFile, rename } from 'node:fs/promises';
import { InternalError } from '../../errors/rotor-error.ts';
import type { SimProduct } from './catalog.ts';
import type { SimContext } from './context.ts';
import { INSTANCE_STATUS, ORDER_STATUS, resumeOrder, watchExpiry } from './lifecycle.ts';
import type {
  Balance,
  Charge,
  ExtractToken,
  Instance,
  MainAccount,
  Merchant,
  Order,
  OrderKind,
  ResetRecord,
  SimState,
  SubAccount,
} from './state.ts';

const VERSION = 1;

interface SavedState {
  version: number;
  /** restarts so far: seeds the generated names of the next run */
  generation: number;
  counter: number;
  merchant: Merchant;
  products: SimProduct[];
  orders: Order[];
  merchantNos: [string, { kind: OrderKind; orderNo: string }][];
  instances: Omit<Instance, 'unwatch'>[];
  mains: (Omit<MainAccount, 'balances'> & { balances: Balance[] })[];
  subs: (Omit<SubAccount, 'limits' | 'used'> & { limits: [string, number][]; used: [string, number][] })[];
  charges: Charge[];
  resets: ResetRecord[];
  extractTokens: [string, ExtractToken][];
  soldIps: string[];
  instanceBytes: [string, number][];
}

/** The sandbox state file beside a store: `<store>.sandbox.json`; none for a Redis or in-memory store. */
export function sandboxStateFile(storePath: string): string | undefined {
  if (/^rediss?:\/\//i.test(storePath) || storePath === ':memory:' || storePath === '') return undefined;
  return `${storePath}.sandbox.json`;
}

function snapshot(state: SimState, generation: number): SavedState {
  return {
    version: VERSION,
    generation,
    counter: state.idCounter,
    merchant: state.merchant,
    products: [...state.products.values()],
    orders: [...state.orders.values()],
    merchantNos: [...state.merchantNos],
    instances: [...state.instances.values()].map(({ unwatch: _unwatch, ...rest }) => rest),
    mains: [...state.mains.values()].map((m) => ({ ...m, balances: [...m.balances.values()] })),
    subs: [...state.subs.values()].map((s) => ({ ...s, limits: [...s.limits], used: [...s.used] })),
    charges: state.charges,
    resets: [...state.resets.values()],
    extractTokens: [...state.extractTokens],
    soldIps: [...state.soldIps],
    instanceBytes: [...state.instanceBytes],
  };
}

/** Reads a saved state into `state`; false when there is no file. A file that cannot be read is an error. */
function restore(state: SimState, saved: SavedState): void {
  if (saved.version !== VERSION) throw new InternalError(`sandbox state file version ${String(saved.version)}, expected ${VERSION}`);
  state.merchant = { ...state.merchant, ...saved.merchant };
  state.products = new Map(saved.products.map((p) => [p.productNo, p]));
  state.orders = new Map(saved.orders.map((o) => [o.orderNo, o]));
  state.merchantNos = new Map(saved.merchantNos);
  state.instances = new Map(saved.instances.map((i) => [i.instanceNo, { ...i }]));
  state.mains = new Map(saved.mains.map((m) => [m.appUsername, { ...m, balances: new Map(m.balances.map((b) => [b.productNo, b])) }]));
  state.subs = new Map(saved.subs.map((s) => [s.appUsername, { ...s, limits: new Map(s.limits), used: new Map(s.used) }]));
  state.charges = saved.charges;
  state.resets = new Map(saved.resets.map((r) => [r.resetNo, r]));
  state.extractTokens = new Map(saved.extractTokens);
  state.soldIps = new Set(saved.soldIps);
  state.instanceBytes = new Map(saved.instanceBytes);
  state.resume(saved.counter, saved.generation);
}

export interface SandboxMemory {
  /** Writes now if anything changed since the last write. */
  save(): Promise<void>;
  /** Stops the timer and writes a last time. */
  close(): Promise<void>;
}

/**
 * Loads `file` into the sandbox (when it exists) and keeps it written. The callback URL is not taken from
 * the file (the daemon sets its own at start).
 */
export async function rememberSandbox(ctx: SimContext, file: string, intervalMs = 1000): Promise<SandboxMemory> {
  let generation = 0;
  mkdirSync(dirname(file), { recursive: true });
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text !== undefined) {
    const saved = JSON.parse(text) as SavedState;
    const callbackUrl = ctx.state.merchant.callbackUrl;
    restore(ctx.state, saved);
    ctx.state.merchant.callbackUrl = callbackUrl;
    generation = saved.generation + 1;
    await resumeWork(ctx);
  }
  let last = '';
  let writing: Promise<void> = Promise.resolve();
  const save = async (): Promise<void> => {
    const next = JSON.stringify(snapshot(ctx.state, generation));
    if (next === last) return;
    last = next;
    const tmp = `${file}.tmp`;
    writing = writing.then(async () => {
      await writeFile(tmp, next);
      await rename(tmp, file);
    });
    await writing;
  };
  const timer = setInterval(() => void save().catch(() => undefined), intervalMs);
  timer.unref();
  return {
    save,
    async close() {
      clearInterval(timer);
      await writing.catch(() => undefined);
      // Synchronously: a close during process exit must not leave the write half done.
      const next = JSON.stringify(snapshot(ctx.state, generation));
      if (next === last) return;
      writeFileSync(`${file}.tmp`, next);
      renameSync(`${file}.tmp`, file);
      last = next;
    },
  };
}

/** What was running when the state was saved, running again. */
async function resumeWork(ctx: SimContext): Promise<void> {
  for (const order of ctx.state.orders.values()) {
    if (order.status === ORDER_STATUS.pending || order.status === ORDER_STATUS.processing) resumeOrder(ctx, order);
  }
  for (const inst of ctx.state.instances.values()) {
    if (inst.dynamic) continue;
    if (inst.status !== INSTANCE_STATUS.running && inst.status !== INSTANCE_STATUS.stopped) continue;
    if (ctx.upstreams && inst.port) inst.port = await ctx.upstreams.instancePort(inst.instanceNo);
    watchExpiry(ctx, inst);
  }
}
