// The event outbox on Redis (see events.ts). Layout (P = prefix):
//   P ev:seq            counter   event ids
//   P ev:<id>           hash      type, time, data (JSON as given), attempts, nextAt ('' = never), deliveredAt, lastError
//   P events:all        zset      id by id (listing since an id)
//   P events:pending    zset      undelivered ids by next attempt (a claim moves the score to the claim's end)
//   P evm:<marker>      string    once-only marker -> event id (PX expiry when the marker has one)
// Appending (marker, id, hash, indexes) and claiming are Lua scripts, so two daemons racing see one outcome.
import type { Redis } from 'ioredis';
import type { EventRecord, EventSettlement, NewEvent } from './events.ts';
import { PUT_ORDER } from './redis-scripts.ts';

type Hash = Record<string, string>;

// KEYS: seq, all, pending, marker ('' when none). ARGV: hasMarker, markerTtlMs (0 = none), type, time, data,
// nextAt ('' = never sent), event hash prefix.
const APPEND_EVENT = `
if ARGV[1] == '1' then
  local set
  if tonumber(ARGV[2]) > 0 then set = redis.call('SET', KEYS[4], '0', 'NX', 'PX', ARGV[2]) else set = redis.call('SET', KEYS[4], '0', 'NX') end
  if not set then return 0 end
end
local id = redis.call('INCR', KEYS[1])
if ARGV[1] == '1' then redis.call('SET', KEYS[4], id, 'KEEPTTL') end
redis.call('HSET', ARGV[7] .. id, 'type', ARGV[3], 'time', ARGV[4], 'data', ARGV[5], 'attempts', 0, 'nextAt', ARGV[6])
redis.call('ZADD', KEYS[2], id, id)
if ARGV[6] ~= '' then redis.call('ZADD', KEYS[3], ARGV[6], id) end
return id
`;

// KEYS: pending. ARGV: now, until, limit.
const CLAIM_EVENTS = `
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[2], id) end
return ids
`;

// An order written together with its event, atomically (Store.putOrderWithEvent): the two scripts above as
// local functions of one script. KEYS: PUT_ORDER's 4, then APPEND_EVENT's 4. ARGV: n (PUT_ORDER's argument
// count), its n arguments, then APPEND_EVENT's. A refused order (its number belongs to another) writes no event.
const PUT_ORDER_WITH_EVENT = `
local function putOrder(KEYS, ARGV)
${PUT_ORDER}
end
local function appendEvent(KEYS, ARGV)
${APPEND_EVENT}
end
local n = tonumber(ARGV[1])
local oa, ea = {}, {}
for i = 2, n + 1 do oa[#oa + 1] = ARGV[i] end
for i = n + 2, #ARGV do ea[#ea + 1] = ARGV[i] end
local r = putOrder({ KEYS[1], KEYS[2], KEYS[3], KEYS[4] }, oa)
if type(r) == 'table' and r.err then return r end
return appendEvent({ KEYS[5], KEYS[6], KEYS[7], KEYS[8] }, ea)
`;

export const EVENT_SCRIPTS = {
  rotorAppendEvent: { numberOfKeys: 4, lua: APPEND_EVENT },
  rotorPutOrderWithEvent: { numberOfKeys: 8, lua: PUT_ORDER_WITH_EVENT },
  rotorClaimEvents: { numberOfKeys: 1, lua: CLAIM_EVENTS },
} as const;

export interface EventKeys {
  seq: string;
  all: string;
  pending: string;
  /** prefix of one event's hash key (+ id) */
  event: string;
  marker(key: string): string;
}

export function eventKeys(prefix: string): EventKeys {
  return {
    seq: `${prefix}ev:seq`,
    all: `${prefix}events:all`,
    pending: `${prefix}events:pending`,
    event: `${prefix}ev:`,
    marker: (key) => `${prefix}evm:${key}`,
  };
}

type Call = (name: string, args: (string | number)[]) => Promise<unknown>;

function toEvent(id: number, h: Hash): EventRecord {
  return {
    id,
    type: String(h.type),
    time: Number(h.time),
    data: JSON.parse(h.data ?? 'null') as unknown,
    attempts: Number(h.attempts ?? 0),
    deliveredAt: h.deliveredAt ? Number(h.deliveredAt) : null,
    nextAttemptAt: h.nextAt ? Number(h.nextAt) : null,
    lastError: h.lastError ?? null,
  };
}

async function readEvents(c: Redis, k: EventKeys, ids: string[]): Promise<EventRecord[]> {
  if (ids.length === 0) return [];
  const pipe = c.pipeline();
  for (const id of ids) pipe.hgetall(k.event + id);
  const results = (await pipe.exec()) ?? [];
  const out: EventRecord[] = [];
  results.forEach(([err, value], i) => {
    if (err) throw err;
    const h = value as Hash;
    if (Object.keys(h).length) out.push(toEvent(Number(ids[i]), h));
  });
  return out.sort((a, b) => a.id - b.id);
}

/** APPEND_EVENT's keys and arguments for `e`. */
export function appendEventCall(k: EventKeys, e: NewEvent, now: number): { keys: string[]; args: (string | number)[] } {
  const ttl = e.markerExpiresAt !== undefined ? Math.max(1, e.markerExpiresAt - now) : 0;
  const nextAt = e.deliver === false ? '' : String(e.time);
  return {
    keys: [k.seq, k.all, k.pending, e.marker !== undefined ? k.marker(e.marker) : k.marker('')],
    args: [e.marker !== undefined ? '1' : '0', ttl, e.type, e.time, JSON.stringify(e.data ?? null), nextAt, k.event],
  };
}

/** The record APPEND_EVENT wrote for `e` (id 0: its marker was taken, nothing written). */
export function appendedEvent(id: number, e: NewEvent): EventRecord | undefined {
  if (id === 0) return undefined;
  const data = JSON.parse(JSON.stringify(e.data ?? null)) as unknown;
  return {
    id,
    type: e.type,
    time: e.time,
    data,
    attempts: 0,
    deliveredAt: null,
    nextAttemptAt: e.deliver === false ? null : e.time,
    lastError: null,
  };
}

export async function appendEvent(call: Call, k: EventKeys, e: NewEvent, now: number): Promise<EventRecord | undefined> {
  const { keys, args } = appendEventCall(k, e, now);
  return appendedEvent(Number(await call('rotorAppendEvent', [...keys, ...args])), e);
}

export async function listEvents(c: Redis, k: EventKeys, filter: { since?: number; limit?: number } = {}): Promise<EventRecord[]> {
  const ids = await c.zrangebyscore(k.all, `(${filter.since ?? 0}`, '+inf', 'LIMIT', 0, filter.limit ?? 100);
  return readEvents(c, k, ids);
}

export async function claimEvents(c: Redis, call: Call, k: EventKeys, now: number, leaseMs: number, limit: number): Promise<EventRecord[]> {
  const ids = (await call('rotorClaimEvents', [k.pending, now, now + leaseMs, limit])) as string[];
  const events = await readEvents(c, k, ids);
  return events.map((e) => ({ ...e, nextAttemptAt: now + leaseMs }));
}

export async function settleEvent(c: Redis, k: EventKeys, id: number, outcome: EventSettlement): Promise<void> {
  const key = k.event + id;
  const m = c.multi().hincrby(key, 'attempts', 1);
  if ('deliveredAt' in outcome)
    m.hset(key, 'deliveredAt', outcome.deliveredAt, 'nextAt', '').hdel(key, 'lastError').zrem(k.pending, String(id));
  else
    m.hset(key, 'nextAt', outcome.nextAttemptAt, 'lastError', outcome.error.slice(0, 500)).zadd(
      k.pending,
      'XX',
      outcome.nextAttemptAt,
      String(id),
    );
  const results = (await m.exec()) ?? [];
  for (const [err] of results) if (err) throw err;
}

export async function clearMarker(c: Redis, k: EventKeys, marker: string): Promise<void> {
  await c.del(k.marker(marker));
}

/** Markers expire by themselves (PX); events are scanned from the oldest, a page at a time. */
export async function pruneEvents(c: Redis, k: EventKeys, options: { deliveredBefore: number; now: number }): Promise<number> {
  let dropped = 0;
  for (let offset = 0; ;) {
    const ids = await c.zrange(k.all, String(offset), String(offset + 499));
    if (ids.length === 0) return dropped;
    const events = await readEvents(c, k, ids);
    const old = events.filter(
      (e) =>
        (e.deliveredAt !== null && e.deliveredAt < options.deliveredBefore) ||
        (e.deliveredAt === null && e.nextAttemptAt === null && e.time < options.deliveredBefore),
    );
    if (old.length > 0) {
      const m = c.multi();
      for (const e of old)
        m.del(k.event + e.id)
          .zrem(k.all, String(e.id))
          .zrem(k.pending, String(e.id));
      await m.exec();
      dropped += old.length;
    }
    offset += ids.length - old.length;
    // Events are in id (and so roughly time) order: a page with nothing old ends the scan.
    if (old.length === 0 || ids.length < 500) return dropped;
  }
}
