// The sandbox's memory across restarts (embedded mode: a file beside the daemon's store). A real platform
// remembers its accounts, balances, orders and instances whatever its merchants do; a sandbox that forgot
// them on every `npm start` left users made through the API without a sub account. The whole state is
// written as one JSON file (to a temporary name, then renamed: a crash mid-write keeps the previous file)
// and read back before the sandbox answers anything. Orders not yet final finish after the usual delay,
// static instances get their upstream port again (the same port number when it is free: a real platform keeps
// an instance's address; when it is taken, a new one, and the instance is listed in `moved` so the sandbox
// sends its instance callback once the merchant's callback address is known) and their expiry watch.
//
// What a write costs at a reseller's size (100,000 sub accounts: a 13 MB file) decides when it happens:
// - only after a change: everything that changes the saved state bumps SimState.revision (the server after
//   an operation that writes, the traffic meters, the order and expiry timers, the test controls), so an
//   idle or read-only sandbox writes nothing and no copy of the last file is kept to compare;
// - at most every `intervalMs`, and never sooner after the previous write than `spacing` times what that
//   write took (writes take at most about 1/(1 + spacing) of the event loop during an import), nor later
//   than `maxDelayMs` after the change;
// - written in pieces (a slice of records at a time, each piece handed to the file before the next is
//   made): no single turn of the event loop serialises the whole state. The records are the ones present
//   when the write began; a record changed meanwhile is written as it is then, and its change bumped the
//   revision, so the next write follows.
// At close the last change is written synchronously (a close during process exit must not leave it half done).
//
// Remembered reqIds (replays.ts: a retry is answered with its first answer, not processed again) are part of the
// state (state.ts rememberReply, the newest 10,000 of the last 10 minutes): recorded in the same turn as the change
// they answer, so a write holds both or neither, and a restarted sandbox still answers a retry of a call its last
// run handled.
//
// Platform numbers (orders, instances) are never handed out twice, even by a sandbox killed before its file was
// written: ids are taken only below a ceiling kept in a small file beside it (`<file>.ids`), written
// synchronously and fsynced ID_BLOCK ids ahead before the first id past the old ceiling is answered; a start resumes
// above the larger of the saved counter and that ceiling (a graceful close lowers the ceiling to the counter,
// so an orderly restart leaves no gap).
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { open, rename } from 'node:fs/promises';
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
  RememberedReply,
  Merchant,
  Order,
  OrderKind,
  ResetRecord,
  SimState,
  SubAccount,
} from './state.ts';
import { REMEMBERED_REPLIES_TTL_MS } from './state.ts';

const VERSION = 1;

/** Ids reserved ahead per synchronous write of the ceiling: one small write per this many orders and instances. */
export const ID_BLOCK = 1000;

interface ReservedIds {
  /** every id handed out is at most this */
  upTo: number;
  /** the run that wrote it */
  generation: number;
}

function readReserved(idsFile: string): ReservedIds | undefined {
  let text: string;
  try {
    text = readFileSync(idsFile, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const v = JSON.parse(text) as Partial<ReservedIds>;
  if (!Number.isSafeInteger(v.upTo) || !Number.isSafeInteger(v.generation)) {
    throw new InternalError(`sandbox id ceiling ${idsFile} is not {"upTo","generation"}`);
  }
  return { upTo: v.upTo!, generation: v.generation! };
}

/**
 * Resumes ids above a ceiling a killed sandbox left (it may have answered ids its state file never held) and keeps
 * the ceiling written ahead of the ids handed out; answers the generation this run writes.
 */
function keepIdsAhead(state: SimState, idsFile: string, loadedGeneration: number): number {
  const reserved = readReserved(idsFile);
  let generation = loadedGeneration;
  if (reserved) {
    generation = Math.max(generation, reserved.generation + 1);
    if (reserved.upTo > state.idCounter) state.resume(reserved.upTo, generation - 1);
  }
  state.reserveIdsWith((next) => {
    const upTo = next - 1 + ID_BLOCK;
    writeReserved(idsFile, { upTo, generation });
    return upTo;
  }, state.idCounter);
  return generation;
}

/**
 * At a close the state file holds every id handed out: the next start continues right after them. Best effort:
 * a ceiling left higher only leaves a gap in the numbers, and a close must not fail on it.
 */
function lowerCeiling(idsFile: string, upTo: number, generation: number): void {
  try {
    writeReserved(idsFile, { upTo, generation });
  } catch {
    // the reserved ceiling stays, which is safe
  }
}

/**
 * Written before it is relied on: synchronously, to a temporary name made durable (fsync), then renamed and the
 * rename made durable (fsync of the directory), so a power loss cannot leave an older ceiling behind ids already
 * answered. Once per ID_BLOCK ids.
 */
function writeReserved(idsFile: string, r: ReservedIds): void {
  const tmp = `${idsFile}.tmp`;
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, JSON.stringify(r));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, idsFile);
  const dir = openSync(dirname(idsFile), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

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
  /** remembered reqIds (absent in files written before them) */
  replies?: [string, RememberedReply][];
}

/** The sandbox state file beside a store: `<store>.sandbox.json`; none for a Redis or in-memory store. */
export function sandboxStateFile(storePath: string): string | undefined {
  if (/^rediss?:\/\//i.test(storePath) || storePath === ':memory:' || storePath === '') return undefined;
  return `${storePath}.sandbox.json`;
}

/** The saved state's lists, each with how one record is written (the maps as arrays of entries). */
type ListKey = Exclude<keyof SavedState, 'version' | 'generation' | 'counter' | 'merchant'>;
type Captured = { head: string; lists: [ListKey, readonly unknown[], ((item: never) => unknown) | undefined][] };

/** The state's records as they are now (references, not copies: cheap), for a write in pieces. */
function capture(state: SimState, generation: number): Captured {
  const head: Pick<SavedState, 'version' | 'generation' | 'counter' | 'merchant'> = {
    version: VERSION,
    generation,
    counter: state.idCounter,
    merchant: state.merchant,
  };
  return {
    head: JSON.stringify(head),
    lists: [
      ['products', [...state.products.values()], undefined],
      ['orders', [...state.orders.values()], undefined],
      ['merchantNos', [...state.merchantNos], undefined],
      ['instances', [...state.instances.values()], ({ unwatch: _unwatch, ...rest }: Instance) => rest],
      ['mains', [...state.mains.values()], (m: MainAccount) => ({ ...m, balances: [...m.balances.values()] })],
      ['subs', [...state.subs.values()], (s: SubAccount) => ({ ...s, limits: [...s.limits], used: [...s.used] })],
      ['charges', state.charges.slice(), undefined],
      ['resets', [...state.resets.values()], undefined],
      ['extractTokens', [...state.extractTokens], undefined],
      ['soldIps', [...state.soldIps], undefined],
      ['instanceBytes', [...state.instanceBytes], undefined],
      ['replies', [...state.replies], undefined],
    ],
  };
}

/** Records serialised per piece (a 100,000-record list is 100 pieces). */
const RECORDS_PER_PIECE = 1000;

/** The file's text in pieces, in order: joined, they are the JSON of a SavedState. */
function* pieces(c: Captured): Generator<string> {
  yield c.head.slice(0, -1);
  for (const [key, items, shape] of c.lists) {
    yield `,${JSON.stringify(key)}:[`;
    for (let from = 0; from < items.length; from += RECORDS_PER_PIECE) {
      let text = from === 0 ? '' : ',';
      const to = Math.min(items.length, from + RECORDS_PER_PIECE);
      for (let i = from; i < to; i++) {
        const item = items[i];
        text += (i > from ? ',' : '') + JSON.stringify(shape ? shape(item as never) : item);
      }
      yield text;
    }
    yield ']';
  }
  yield '}';
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
  const now = Date.now();
  state.replies = new Map((saved.replies ?? []).filter(([, r]) => now - r.at < REMEMBERED_REPLIES_TTL_MS));
  state.resume(saved.counter, saved.generation);
}

export interface SandboxMemory {
  /** Writes now if anything changed since the last write (after any write under way). */
  save(): Promise<void>;
  /** Stops the timer and writes a last time (synchronously) if anything changed. */
  close(): Promise<void>;
  /** Writes done so far (not counting the one at close). */
  readonly writes: number;
  /** Resolves once no write is under way (a file renamed into place is counted only when its write settles). */
  settled(): Promise<void>;
  /** Static instances whose upstream port had to change at the load (their saved port was taken). */
  readonly moved: readonly string[];
}

export interface PersistOptions {
  /** Least time between two writes; default 1000 ms. */
  intervalMs?: number;
  /** A write waits at least this many times the previous write's duration after it; default 20. */
  spacing?: number;
  /** A change waits at most this long (plus a write under way) to be written; default 30 s. */
  maxDelayMs?: number;
}

/**
 * Loads `file` into the sandbox (when it exists) and keeps it written. The callback URL is not taken from
 * the file (the daemon sets its own at start).
 */
export async function rememberSandbox(ctx: SimContext, file: string, options: PersistOptions = {}): Promise<SandboxMemory> {
  const intervalMs = options.intervalMs ?? 1000;
  const spacing = options.spacing ?? 20;
  const maxDelayMs = Math.max(intervalMs, options.maxDelayMs ?? 30_000);
  let generation = 0;
  const loading = performance.now();
  mkdirSync(dirname(file), { recursive: true });
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const state = ctx.state;
  const loaded = text !== undefined;
  const idsFile = `${file}.ids`;
  let moved: string[] = [];
  if (text !== undefined) {
    const saved = JSON.parse(text) as SavedState;
    text = undefined;
    const callbackUrl = state.merchant.callbackUrl;
    restore(state, saved);
    state.merchant.callbackUrl = callbackUrl;
    generation = saved.generation + 1;
  }
  generation = keepIdsAhead(state, idsFile, generation);
  if (loaded) moved = await resumeWork(ctx);
  // A state just read is what the file holds (the callback URL is not worth a rewrite; a port that moved is:
  // the next start then prefers the new one); a new sandbox's first state is written once.
  let written = loaded && moved.length === 0 ? state.revision : state.revision - 1;
  let writes = 0;
  let writing: Promise<void> | undefined;
  // Until a first write, reading the file stands for what a write costs: the daemon's start-up calls (which
  // change the state) are not followed by a rewrite of a big state while it starts.
  let lastEnd = performance.now();
  let lastTookMs = loaded ? lastEnd - loading : 0;
  /** When the oldest change not yet written was first seen by a tick. */
  let dirtySince: number | undefined;

  const writeInPieces = async (): Promise<void> => {
    const started = performance.now();
    const tmp = `${file}.tmp`;
    const fh = await open(tmp, 'w');
    // The revision is read with the capture, after the open: a change made while the file was opening is in
    // the capture and must not be counted as unwritten (it would cost a second, identical write).
    const revision = state.revision;
    const captured = capture(state, generation);
    try {
      let chunk = '';
      for (const piece of pieces(captured)) {
        chunk += piece;
        if (chunk.length >= 256 * 1024) {
          await fh.write(chunk);
          chunk = '';
        }
      }
      await fh.write(chunk);
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
    written = revision;
    writes++;
    lastEnd = performance.now();
    lastTookMs = lastEnd - started;
  };
  const save = (): Promise<void> => {
    if (writing) return writing.then(save);
    if (state.revision === written) return Promise.resolve();
    dirtySince = undefined;
    writing = writeInPieces().finally(() => {
      writing = undefined;
    });
    return writing;
  };
  const tick = (): void => {
    if (writing || state.revision === written) return;
    const now = performance.now();
    dirtySince ??= now;
    if (now - lastEnd < spacing * lastTookMs && now - dirtySince < maxDelayMs) return;
    // A failed write (disk full) leaves the change unwritten: the next tick tries again.
    save().catch(() => undefined);
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return {
    save,
    moved,
    get writes() {
      return writes;
    },
    async settled() {
      while (writing) await writing.catch(() => undefined);
    },
    async close() {
      clearInterval(timer);
      await writing?.catch(() => undefined);
      if (state.revision !== written) {
        // Synchronously: a close during process exit must not leave the write half done.
        writeFileSync(`${file}.tmp`, [...pieces(capture(state, generation))].join(''));
        renameSync(`${file}.tmp`, file);
        written = state.revision;
      }
      lowerCeiling(idsFile, state.idCounter, generation);
    },
  };
}

/** What was running when the state was saved, running again; answers the static instances whose port moved. */
async function resumeWork(ctx: SimContext): Promise<string[]> {
  for (const order of ctx.state.orders.values()) {
    if (order.status === ORDER_STATUS.pending || order.status === ORDER_STATUS.processing) resumeOrder(ctx, order);
  }
  const moved: string[] = [];
  for (const inst of ctx.state.instances.values()) {
    if (inst.dynamic) continue;
    if (inst.status !== INSTANCE_STATUS.running && inst.status !== INSTANCE_STATUS.stopped) continue;
    if (ctx.upstreams && inst.port) {
      const port = await ctx.upstreams.instancePort(inst.instanceNo, inst.port);
      if (port !== inst.port) {
        inst.port = port;
        moved.push(inst.instanceNo);
      }
    }
    watchExpiry(ctx, inst);
  }
  if (moved.length > 0) ctx.state.touch();
  return moved;
}
