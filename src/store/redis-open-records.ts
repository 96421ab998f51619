// Whose `open` connection records these are, on a store a fleet shares. Every daemon (one RedisStore) is an
// owner with a fresh id per process and a lease in a sorted set scored by its expiry (Redis's own clock, so
// the daemons' clocks do not matter). A batch that writes `open` records names their owner and renews its
// lease in the same script; a timer renews it every third of the lease's life while the store is open, and
// closing the store gives it up. Settling turns the `open` records of owners whose lease lapsed into `lost`
// (bytes kept): at start (ConnectionLogStore.settleOpen) and then every lease's life from the same timer, so
// the records of a peer that died and never came back are settled by those that live on.
// Layout (P = the fleet prefix), beside the log's own keys (redis-connection-log.ts):
//   P connlog:open     hash        record id -> owner, for every record stored `open`
//   P connlog:owners   sorted set  owner -> its lease's expiry (epoch ms, Redis TIME)
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { LOST_REASON, RECORD_FIXED_BYTES, RECORD_TEXT_FIELDS } from './connection-log-types.ts';
import type { RedisConnection } from './redis-connection.ts';
import { callScript, defineScripts } from './redis-scripts.ts';

/** Lua: the size of a record's JSON as recordSize() counts it, and the bytes held (counted once if missing). */
export const SIZE_LUA = `
local FIELDS = {${RECORD_TEXT_FIELDS.map((f) => `'${f}'`).join(', ')}}
local function size(json)
  -- A text that is not a record (never written so by Rotor) is measured by its length: a script never fails on it.
  local ok, r = pcall(cjson.decode, json)
  if not ok or type(r) ~= 'table' then return ${RECORD_FIXED_BYTES} + #json end
  local n = ${RECORD_FIXED_BYTES}
  for _, f in ipairs(FIELDS) do
    local v = r[f]
    if type(v) == 'string' then n = n + #v end
  end
  return n
end
local function held(rec, totals)
  local b = redis.call('HGET', totals, 'bytes')
  if b then return tonumber(b) end
  -- A log written before the byte count existed: counted once.
  local sum, cursor = 0, '0'
  repeat
    local page = redis.call('HSCAN', rec, cursor, 'COUNT', 1000)
    cursor = page[1]
    for i = 2, #page[2], 2 do sum = sum + size(page[2][i]) end
  until cursor == '0'
  return sum
end
`;

/** Lua: Redis's clock in epoch ms. */
export const NOW_LUA = `
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

// KEYS: owners. ARGV: owner, lease ms.
const RENEW = `${NOW_LUA}
redis.call('ZADD', KEYS[1], nowMs() + tonumber(ARGV[2]), ARGV[1])
return 1
`;

// KEYS: rec, held, open, owners. ARGV: reason. The open records of owners whose lease lapsed become `lost`
// (their bytes kept, the bytes held adjusted to the reason's); lapsed owners are forgotten. Returns how many.
const SETTLE = `${SIZE_LUA}${NOW_LUA}
local now = nowMs()
local open = redis.call('HGETALL', KEYS[3])
if #open == 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  return 0
end
local b = held(KEYS[1], KEYS[2])
local live, n = {}, 0
for i = 1, #open, 2 do
  local id, owner = open[i], open[i + 1]
  if live[owner] == nil then
    local expiry = redis.call('ZSCORE', KEYS[4], owner)
    live[owner] = expiry ~= false and tonumber(expiry) > now
  end
  if not live[owner] then
    local old = redis.call('HGET', KEYS[1], id)
    if old then
      local r = cjson.decode(old)
      if r.result == 'open' then
        r.result = 'lost'
        r.reason = ARGV[1]
        local json = cjson.encode(r)
        redis.call('HSET', KEYS[1], id, json)
        b = b + size(json) - size(old)
        n = n + 1
      end
    end
    redis.call('HDEL', KEYS[3], id)
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
redis.call('HSET', KEYS[2], 'bytes', b)
return n
`;

const SCRIPTS = {
  rotorConnlogRenew: { numberOfKeys: 1, lua: RENEW },
  rotorConnlogSettle: { numberOfKeys: 4, lua: SETTLE },
} as const;

/** The keys of the connection log under a prefix. */
export class ConnectionLogKeys {
  readonly idx: string;
  readonly rec: string;
  readonly held: string;
  readonly open: string;
  readonly owners: string;

  constructor(readonly prefix: string) {
    this.idx = `${prefix}connlog:idx`;
    this.rec = `${prefix}connlog:rec`;
    this.held = `${prefix}connlog:held`;
    this.open = `${prefix}connlog:open`;
    this.owners = `${prefix}connlog:owners`;
  }
}

export interface OpenRecordOwnerOptions {
  /** The lease's life (fleet.aliveTtlMs); default 10 s. */
  leaseMs?: number;
  /** Default: a fresh id per process. */
  id?: string;
}

/** This daemon as the owner of its open records (one per RedisStore). */
export class OpenRecordOwner {
  readonly id: string;
  readonly leaseMs: number;
  readonly keys: ConnectionLogKeys;
  private timer: NodeJS.Timeout | undefined;
  private ticks = 0;
  private closed = false;

  constructor(
    private readonly redis: RedisConnection,
    prefix: string,
    options: OpenRecordOwnerOptions = {},
  ) {
    this.id = options.id ?? randomUUID();
    this.leaseMs = Math.max(30, options.leaseMs ?? 10_000);
    this.keys = new ConnectionLogKeys(prefix);
    defineScripts(redis.client, SCRIPTS);
  }

  /** Keeps the lease renewed and dead peers' records settled from now on (idempotent). */
  keep(): void {
    if (this.timer || this.closed) return;
    this.timer = setInterval(() => void this.tick(), Math.floor(this.leaseMs / 3));
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      await this.renew();
      // Settling every lease's life: a peer's records are lost at most two lease lives after it died.
      if (++this.ticks % 3 === 0) await this.settle();
    } catch {
      // Redis unreachable: the connection reports the outage once; the next tick tries again.
    }
  }

  renew(): Promise<unknown> {
    return this.redis.run('connlog lease', (c: Redis) => callScript(c, 'rotorConnlogRenew', [this.keys.owners, this.id, this.leaseMs]));
  }

  /** The open records of owners whose lease lapsed become `lost`; resolves with how many. */
  async settle(): Promise<number> {
    const k = this.keys;
    const n = await this.redis.run('connlog settle', (c: Redis) =>
      callScript(c, 'rotorConnlogSettle', [k.rec, k.held, k.open, k.owners, LOST_REASON]),
    );
    return Number(n);
  }

  /** Stops renewing and gives the lease up (the store is closing: what is still open here is nobody's now). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.redis.run('connlog lease', (c: Redis) => c.zrem(this.keys.owners, this.id)).catch(() => undefined);
  }
}
