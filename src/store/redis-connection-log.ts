// The connection log for a fleet (store.path redis://…), on the store's Redis connection. Layout (P = the
// fleet prefix):
//   P connlog:idx              sorted set   record id, scored by startedAt (ties: Redis orders by member,
//                                           the same (startedAt, id) order SQLite's index gives)
//   P connlog:rec              hash         record id -> record JSON
//   P connlog:held             hash         bytes -> recordSize() summed over the records held
//   P usage:<g>:<period>       hash         <user>|up, |down, |n, |f counters of one hour or day
//   P usage:<g>:periods        sorted set   the periods that have a hash, scored by period
//   P connlog:idx:u:<user>     sorted set   one user's record ids, scored by startedAt (as connlog:idx)
//   P connlog:byuser           string       set once every record held is in its user's index
//   P connlog:byuser:pass      hash         where the one-time pass that fills them from older records is
//   P connlog:open, :owners                 whose the \`open\` records are (redis-open-records.ts)
//   P connlog:writers          hash         writer -> "seq part": the last batch it wrote (batch-marks.ts)
//   P connlog:writers:at       sorted set   writer -> its last write (store clock, ms): marks go BATCH_WRITER_TTL_MS after
// Bounded like SQLite: a batch is one script that writes the records and, when the log would pass
// log.access.maxRecords or maxSize, removes the oldest in the same step, so no reader (of any daemon of the
// fleet) ever sees more; the rollup increments and the batch's writer mark are written by the same script, so a batch
// written again (its first write landed, its answer was lost) changes nothing. Retention on the timer trims by
// age and by count (the oldest first).
// One user's records (the portal's poll, GET /v1/connections?user=) are read from that user's index only: the
// append script adds a new record's id to it, and every removal of records (the bounds, retention) takes it out in
// the same script, so it never holds more nor less than the log holds of that user. A log written by an older
// version has no per-user index: a one-time pass (indexPass, started with settleOpen at a daemon's start, shared by
// the fleet's daemons through its cursor in connlog:byuser:pass) fills it from the records held, a page per script;
// until it sets connlog:byuser, one user's records are found by reading the whole log newest first, as before.
// One user's rollups (the portal's usage page, GET /v1/usage?user=) are that user's four fields of each period's
// hash in the window (one HMGET each, pipelined): no key of their own, so nothing more to write, trim or fill.
// A result filter without a user is applied while reading newest first.
import type { Redis } from 'ioredis';
import type { RedisConnection } from './redis-connection.ts';
import { foldRollups } from './connection-log-rollup.ts';
import { RECORD_FIXED_BYTES } from './connection-log-types.ts';
import { StoreError } from './errors.ts';
import { BATCH_MARK_LUA, redisBatchMark } from './batch-marks.ts';
import { NOW_LUA, SIZE_LUA, type OpenRecordOwner } from './redis-open-records.ts';
import {
  recordSize,
  type ConnectionLogStore,
  type ConnectionQuery,
  type ConnectionRecord,
  type Granularity,
  type RecordBounds,
  type RecordFootprint,
  type RetentionLimits,
  type UsageQuery,
  type UsageRollup,
} from './connection-log-types.ts';

/** Records read per round trip while filtering. */
const SCAN_PAGE = 500;
/** Periods whose HMGETs of one user's fields go in one pipeline. */
const USAGE_PAGE = 1000;
/** Records one step of the one-time pass reads at most (one script each). */
const PASS_STEP = 500;
/** A failed step of the one-time pass is tried again after this long. */
const PASS_RETRY_MS = 5000;

// Lua, after SIZE_LUA: a record leaving the log leaves its user's index; returns its recordSize(). Never fails: a
// stored text that is not a record is measured by its length, and an index key of another type is left as it is
// (APPEND writes after its checks, and must not fail half-way).
const BY_USER_LUA = `
local function leaving(prefix, id, json)
  local ok, r = pcall(cjson.decode, json)
  if not ok or type(r) ~= 'table' then return ${RECORD_FIXED_BYTES} + #json end
  if type(r.user) == 'string' then redis.pcall('ZREM', prefix .. 'connlog:idx:u:' .. r.user, id) end
  local n = ${RECORD_FIXED_BYTES}
  for _, f in ipairs(FIELDS) do
    local v = r[f]
    if type(v) == 'string' then n = n + #v end
  end
  return n
end
-- The result of a stored record's text; nil when it is not a record.
local function resultOf(json)
  local ok, r = pcall(cjson.decode, json)
  if ok and type(r) == 'table' then return r.result end
  return nil
end
-- Every key the append writes is of its type or absent: checked before the first write (an error reply then).
local function wrongType(checks)
  for i = 1, #checks, 2 do
    local t = redis.call('TYPE', checks[i])['ok']
    if t ~= 'none' and t ~= checks[i + 1] then return checks[i] .. ' holds a ' .. t .. ', not a ' .. checks[i + 1] end
  end
  return nil
end
`;

// KEYS: idx, rec, held, open, owners, the writers' marks hash, the hour and day period sets, the marks' times, then
// the rollup hashes. ARGV: maxRecords, maxBytes, owner, lease ms, the batch's mark ('' none: redisBatchMark), the
// number of records, the fleet prefix, 0 (unused: the mark is timed by Redis's TIME), then per record: startedAt, id, JSON, recordSize, 1
// when it is \`open\`, its user ('' for none); then per rollup increment: its hash's and its period set's index in
// KEYS, period, user, up, down, connections, failures. A batch taken before (its writer's mark): nothing is done, -1.
// Nothing can fail after its first write (the mark): every key's type is checked first (WRONGTYPE reply, nothing
// written), stored texts are decoded under pcall, a user's index is written under pcall (it is no part of the bill),
// and append() sends only whole numbers (STORE_INVALID before anything is sent). Redis refuses a script's first
// write only when out of memory. So a unit fails whole or lands whole: its rollups are never added twice by the
// halves the recorder writes after an error of the unit's own (test/store/redis-append-partial.test.ts). A stored
// record is replaced only when it is an \`open\` checkpoint (or was settled \`lost\` while its daemon stalled). Open records are the owner's, its lease
// renewed with them. A new record's id goes into its user's index too, and a record removed to make room leaves
// it. Returns the records removed to make room.
const APPEND = `${SIZE_LUA}${NOW_LUA}${BY_USER_LUA}${BATCH_MARK_LUA}
local checks = {KEYS[1], 'zset', KEYS[2], 'hash', KEYS[3], 'hash', KEYS[4], 'hash', KEYS[5], 'zset', KEYS[6], 'hash',
  KEYS[7], 'zset', KEYS[8], 'zset', KEYS[9], 'zset'}
for k = 10, #KEYS do
  checks[#checks + 1] = KEYS[k]
  checks[#checks + 1] = 'hash'
end
local wrong = wrongType(checks)
if wrong then return redis.error_reply('WRONGTYPE connection log: ' .. wrong .. ' (nothing written)') end
if ARGV[5] ~= '' and taken(KEYS[6], KEYS[9], ARGV[5]) then return -1 end
local maxRecords, maxBytes, prefix = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[7]
local lastRecord = 8 + 6 * tonumber(ARGV[6])
for i = lastRecord + 1, #ARGV, 8 do
  local key, user = KEYS[tonumber(ARGV[i])], ARGV[i + 3]
  redis.call('HINCRBY', key, user .. '|up', ARGV[i + 4])
  redis.call('HINCRBY', key, user .. '|down', ARGV[i + 5])
  redis.call('HINCRBY', key, user .. '|n', ARGV[i + 6])
  redis.call('HINCRBY', key, user .. '|f', ARGV[i + 7])
  redis.call('ZADD', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2], ARGV[i + 2])
end
if lastRecord == 8 then return 0 end
local b = held(KEYS[2], KEYS[3])
local anyOpen = false
for i = 9, lastRecord, 6 do
  local id, json = ARGV[i + 1], ARGV[i + 2]
  local old = redis.call('HGET', KEYS[2], id)
  local written = true
  -- A text there that is not a record (never written so by Rotor) is replaced as if the place were empty.
  local was = old and resultOf(old)
  if not was then
    redis.call('ZADD', KEYS[1], ARGV[i], id)
    redis.call('HSET', KEYS[2], id, json)
    if ARGV[i + 5] ~= '' then redis.pcall('ZADD', prefix .. 'connlog:idx:u:' .. ARGV[i + 5], ARGV[i], id) end
    b = b + tonumber(ARGV[i + 3])
    if old then b = b - size(old) end
  elseif was == 'open' or was == 'lost' then
    redis.call('HSET', KEYS[2], id, json)
    b = b + tonumber(ARGV[i + 3]) - size(old)
  else
    written = false
  end
  if written and ARGV[i + 4] == '1' then
    redis.call('HSET', KEYS[4], id, ARGV[3])
    anyOpen = true
  elseif written then
    redis.call('HDEL', KEYS[4], id)
  end
end
if anyOpen then redis.call('ZADD', KEYS[5], nowMs() + tonumber(ARGV[4]), ARGV[3]) end
local n = redis.call('ZCARD', KEYS[1])
local removed = 0
while n > maxRecords or (b > maxBytes and n > 0) do
  -- Those past maxRecords, else about as many average records as the bytes over (at least one).
  local k = n - maxRecords
  if k <= 0 then k = math.max(1, math.floor((b - maxBytes) / (b / n))) end
  local ids = redis.call('ZRANGE', KEYS[1], 0, math.min(1000, k) - 1)
  if #ids == 0 then break end
  local texts = redis.call('HMGET', KEYS[2], unpack(ids))
  for j, t in ipairs(texts) do if t then b = b - leaving(prefix, ids[j], t) end end
  redis.call('ZREM', KEYS[1], unpack(ids))
  redis.call('HDEL', KEYS[2], unpack(ids))
  redis.call('HDEL', KEYS[4], unpack(ids))
  n = n - #ids
  removed = removed + #ids
end
redis.call('HSET', KEYS[3], 'bytes', b)
return removed
`;

// KEYS: idx, rec, held, open. ARGV: the fleet prefix, then ids. Removes them (and from their users' indexes) and
// their bytes; returns how many were held.
const REMOVE = `${SIZE_LUA}${BY_USER_LUA}
local prefix = table.remove(ARGV, 1)
local b = held(KEYS[2], KEYS[3])
local texts = redis.call('HMGET', KEYS[2], unpack(ARGV))
local n = 0
for j, t in ipairs(texts) do if t then b = b - leaving(prefix, ARGV[j], t); n = n + 1 end end
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
redis.call('HDEL', KEYS[4], unpack(ARGV))
redis.call('HSET', KEYS[3], 'bytes', b)
return n
`;

// The one-time pass over a log written before the per-user index (see the top). KEYS: idx, rec, the pass's hash,
// the done flag. ARGV: the fleet prefix, the records to read at most. One step: the next page of records (HSCAN
// of rec: every record held from the pass's start to its end is read at least once) into their users' indexes,
// scored as in idx. Returns 1 while there is more, 0 once done (the flag set, the pass's hash deleted).
const INDEX_PASS = `
if redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
local prefix = ARGV[1]
local page = redis.call('HSCAN', KEYS[2], redis.call('HGET', KEYS[3], 'cursor') or '0', 'COUNT', ARGV[2])
local kv = page[2]
for i = 1, #kv, 2 do
  local ok, r = pcall(cjson.decode, kv[i + 1])
  local at = redis.call('ZSCORE', KEYS[1], kv[i])
  if ok and type(r) == 'table' and type(r.user) == 'string' and at then
    redis.call('ZADD', prefix .. 'connlog:idx:u:' .. r.user, at, kv[i])
  end
end
if page[1] ~= '0' then
  redis.call('HSET', KEYS[3], 'cursor', page[1])
  return 1
end
redis.call('SET', KEYS[4], '1')
redis.call('DEL', KEYS[3])
return 0
`;

// KEYS: rec, held. Returns the bytes held.
const HELD = `${SIZE_LUA}
local b = held(KEYS[1], KEYS[2])
redis.call('HSET', KEYS[2], 'bytes', b)
return b
`;

const SCRIPTS = {
  rotorConnlogAppend: { lua: APPEND },
  rotorConnlogRemove: { numberOfKeys: 4, lua: REMOVE },
  rotorConnlogHeld: { numberOfKeys: 2, lua: HELD },
  rotorConnlogIndexPass: { numberOfKeys: 4, lua: INDEX_PASS },
} as const;

// An argument list may be passed as one array (ioredis flattens it one level): a variable-length list is never
// spread into a call, whose arguments live on the stack (a unit of 16,000 rollup rows, 128,000 arguments,
// overflowed it).
type ScriptCall = (...args: (string | number | readonly (string | number)[])[]) => Promise<unknown>;
type Scripted<T> = T & Record<keyof typeof SCRIPTS, ScriptCall>;

/** The client with the log's scripts registered (before any MULTI is made from it: a MULTI copies the commands). */
function scripted(c: Redis): Scripted<Redis> {
  const defined = c as unknown as Record<string, unknown>;
  for (const [name, s] of Object.entries(SCRIPTS)) if (typeof defined[name] !== 'function') c.defineCommand(name, s);
  return c as Scripted<Redis>;
}

/** A unit append() will not send: refused before anything is written (the recorder splits it: STORE_INVALID). */
const invalid = (what: string): StoreError => new StoreError('STORE_INVALID', `connlog append: ${what}`);

const UNBOUNDED: RecordBounds = { maxRecords: Number.MAX_SAFE_INTEGER, maxBytes: Number.MAX_SAFE_INTEGER };

export class RedisConnectionLog implements ConnectionLogStore {
  private readonly idx: string;
  private readonly rec: string;
  private readonly held: string;
  private readonly open: string;
  private readonly prefix: string;
  private readonly bounds: RecordBounds;
  /** Set once connlog:byuser is seen: one user's records are read from that user's index from then on. */
  private byUser = false;
  private pass: Promise<void> | undefined;

  constructor(
    private readonly redis: RedisConnection,
    private readonly owner: OpenRecordOwner,
    bounds: Partial<RecordBounds> = {},
  ) {
    ({ idx: this.idx, rec: this.rec, held: this.held, open: this.open, prefix: this.prefix } = owner.keys);
    this.bounds = { ...UNBOUNDED, ...bounds };
  }

  /**
   * Settles the open records of daemons whose lease lapsed now, and from now on every lease's life. Called at a
   * daemon's start: also starts the one-time pass that fills the per-user index of a log written before it.
   */
  async settleOpen(): Promise<number> {
    this.owner.keep();
    this.pass ??= this.indexPass();
    return this.owner.settle();
  }

  /**
   * The one-time pass (INDEX_PASS), a step at a time with a turn of the event loop between steps, until the store
   * says it is done (by this daemon or another; a step that fails is tried again later; it stops with the store).
   * Resolves when done or stopped.
   */
  indexPass(): Promise<void> {
    const k = this.owner.keys;
    const keys = [this.idx, this.rec, `${this.prefix}connlog:byuser:pass`, `${this.prefix}connlog:byuser`];
    return new Promise<void>((resolve) => {
      const step = (): void => {
        if (this.redis.client.status === 'end') return resolve();
        this.redis
          .run('connlog index pass', (c) => scripted(c).rotorConnlogIndexPass(keys, k.prefix, PASS_STEP))
          .then((more) => {
            if (Number(more) === 0) {
              this.byUser = true;
              resolve();
            } else setImmediate(step);
          })
          .catch(() => setTimeout(step, PASS_RETRY_MS).unref());
      };
      step();
    });
  }

  /** Whether one user's records may be read from that user's index (the pass has run on this store). */
  private async indexed(): Promise<boolean> {
    if (!this.byUser) this.byUser = (await this.redis.run('connlog query', (c) => c.exists(`${this.prefix}connlog:byuser`))) === 1;
    return this.byUser;
  }

  private periods(g: Granularity): string {
    return `${this.prefix}usage:${g}:periods`;
  }

  private usageKey(g: Granularity, period: number): string {
    return `${this.prefix}usage:${g}:${period}`;
  }

  /** Every record is stored as JSON: none is refused (0). One script: records, rollups and the batch's id together. */
  async append(records: readonly ConnectionRecord[], usage?: readonly UsageRollup[], batchId?: string): Promise<number> {
    if (records.length === 0 && (usage === undefined || usage.length === 0)) return 0;
    const { owner } = this;
    const keys: string[] = [this.idx, this.rec, this.held, this.open, owner.keys.owners];
    keys.push(`${this.prefix}connlog:writers`, this.periods('hour'), this.periods('day'), `${this.prefix}connlog:writers:at`);
    const args: (string | number)[] = [this.bounds.maxRecords, this.bounds.maxBytes, owner.id, owner.leaseMs];
    args.push(redisBatchMark(batchId), records.length, this.prefix, 0);
    let open = 0;
    for (const r of records) {
      if (!Number.isFinite(r.startedAt)) throw invalid(`record ${r.id}: startedAt ${r.startedAt}`);
      const isOpen = r.result === 'open' ? 1 : 0;
      open |= isOpen;
      args.push(r.startedAt, r.id, JSON.stringify(r), recordSize(r), isOpen, r.user ?? '');
    }
    // Each rollup hash is named once in KEYS (a batch touches an hour or two and a day).
    const hashIndex = new Map<string, number>();
    for (const u of usage ?? foldRollups(records)) {
      // Whole numbers only: HINCRBY refuses anything else, and the script must not fail after its first write.
      for (const v of [u.period, u.bytesUp, u.bytesDown, u.connections, u.failures])
        if (!Number.isSafeInteger(v)) throw invalid(`usage row of ${u.user} (${u.granularity} ${u.period}): ${v} is not a whole number`);
      const key = this.usageKey(u.granularity, u.period);
      let index = hashIndex.get(key);
      if (index === undefined) {
        index = keys.push(key);
        hashIndex.set(key, index);
      }
      args.push(index, u.granularity === 'hour' ? 7 : 8, u.period, u.user, u.bytesUp, u.bytesDown, u.connections, u.failures);
    }
    // Its open records' lease is renewed from now on.
    if (open === 1) owner.keep();
    // The lists as arrays, never spread (ScriptCall).
    await this.redis.run('connlog append', (c) => scripted(c).rotorConnlogAppend(keys.length, keys, args));
    return 0;
  }

  async query(q: ConnectionQuery): Promise<ConnectionRecord[]> {
    const out: ConnectionRecord[] = [];
    const max = q.after ? q.after.startedAt : q.until !== undefined ? `(${q.until}` : '+inf';
    const min = q.since ?? '-inf';
    // One user's: that user's index (only its records are read); else the log's, filtered while read.
    const mine = q.user !== undefined && (await this.indexed());
    const idx = mine ? `${this.prefix}connlog:idx:u:${q.user}` : this.idx;
    let offset = 0;
    while (out.length < q.limit) {
      // Every record of a user's index (or of the log without a filter) is one to answer: no more are read than
      // asked for (and one, a tie with \`after\` passed over).
      const want = (mine || q.user === undefined) && q.result === undefined ? Math.min(SCAN_PAGE, q.limit - out.length + 1) : SCAN_PAGE;
      const page = await this.redis.run('connlog query', (c) => c.zrevrangebyscore(idx, max, min, 'WITHSCORES', 'LIMIT', offset, want));
      if (page.length === 0) break;
      offset += page.length / 2;
      const ids: string[] = [];
      for (let i = 0; i < page.length; i += 2) {
        const id = page[i]!;
        const score = Number(page[i + 1]);
        if (q.after && score === q.after.startedAt && id >= q.after.id) continue;
        if (q.until !== undefined && score >= q.until) continue;
        ids.push(id);
      }
      if (ids.length === 0) continue;
      const texts = await this.redis.run('connlog query', (c) => c.hmget(this.rec, ...ids));
      for (const text of texts) {
        if (!text) continue;
        const r = JSON.parse(text) as ConnectionRecord;
        if (q.user !== undefined && r.user !== q.user) continue;
        if (q.result !== undefined && r.result !== q.result) continue;
        out.push(r);
        if (out.length >= q.limit) break;
      }
    }
    return out;
  }

  async usage(q: UsageQuery): Promise<UsageRollup[]> {
    const periods = await this.redis.run('connlog usage', (c) => c.zrangebyscore(this.periods(q.granularity), q.from, `(${q.to}`));
    if (q.user !== undefined) return this.userUsage(q.user, q.granularity, periods);
    const out: UsageRollup[] = [];
    for (const p of periods) {
      const period = Number(p);
      const hash = await this.redis.run('connlog usage', (c) => c.hgetall(this.usageKey(q.granularity, period)));
      const byUser = new Map<string, UsageRollup>();
      for (const [field, value] of Object.entries(hash)) {
        const bar = field.lastIndexOf('|');
        const user = field.slice(0, bar);
        if (q.user !== undefined && user !== q.user) continue;
        let row = byUser.get(user);
        if (!row) {
          row = { user, granularity: q.granularity, period, bytesUp: 0, bytesDown: 0, connections: 0, failures: 0 };
          byUser.set(user, row);
        }
        const n = Number(value);
        const kind = field.slice(bar + 1);
        if (kind === 'up') row.bytesUp = n;
        else if (kind === 'down') row.bytesDown = n;
        else if (kind === 'n') row.connections = n;
        else if (kind === 'f') row.failures = n;
      }
      out.push(...[...byUser.values()].sort((a, b) => (a.user < b.user ? -1 : a.user > b.user ? 1 : 0)));
    }
    return out;
  }

  /** One user's rows of the periods given: its four fields of each period's hash, a pipeline per page of periods. */
  private async userUsage(user: string, granularity: Granularity, periods: string[]): Promise<UsageRollup[]> {
    const out: UsageRollup[] = [];
    const fields = [`${user}|up`, `${user}|down`, `${user}|n`, `${user}|f`];
    for (let i = 0; i < periods.length; i += USAGE_PAGE) {
      const page = periods.slice(i, i + USAGE_PAGE);
      const replies = await this.redis.run('connlog usage', async (c) => {
        const p = c.pipeline();
        for (const period of page) p.hmget(this.usageKey(granularity, Number(period)), ...fields);
        return (await p.exec()) ?? [];
      });
      for (let j = 0; j < page.length; j++) {
        const [err, values] = replies[j] ?? [new Error('no reply')];
        if (err) throw this.redis.toStoreError(err, 'connlog usage');
        const [up, down, n, f] = values as (string | null)[];
        if (up == null && down == null && n == null && f == null) continue;
        out.push({
          user,
          granularity,
          period: Number(page[j]),
          bytesUp: Number(up ?? 0),
          bytesDown: Number(down ?? 0),
          connections: Number(n ?? 0),
          failures: Number(f ?? 0),
        });
      }
    }
    return out;
  }

  async prune(limits: RetentionLimits): Promise<number> {
    let removed = 0;
    const old = await this.redis.run('connlog prune', (c) => c.zrangebyscore(this.idx, '-inf', `(${limits.recordsBefore}`));
    removed += await this.remove(old);
    const total = await this.count();
    if (total > limits.maxRecords) {
      const over = await this.redis.run('connlog prune', (c) => c.zrange(this.idx, '0', String(total - limits.maxRecords - 1)));
      removed += await this.remove(over);
    }
    for (const g of ['hour', 'day'] as const) {
      const gone = await this.redis.run('connlog prune', (c) => c.zrangebyscore(this.periods(g), '-inf', `(${limits.usageBefore}`));
      if (gone.length === 0) continue;
      await this.redis.run('connlog prune', async (c) => {
        const m = c.multi();
        for (const p of gone) m.del(this.usageKey(g, Number(p)));
        m.zremrangebyscore(this.periods(g), '-inf', `(${limits.usageBefore}`);
        await m.exec();
      });
    }
    return removed;
  }

  private async remove(ids: string[]): Promise<number> {
    for (let i = 0; i < ids.length; i += SCAN_PAGE) {
      const slice = ids.slice(i, i + SCAN_PAGE);
      await this.redis.run('connlog prune', (c) =>
        scripted(c).rotorConnlogRemove([this.idx, this.rec, this.held, this.open], this.prefix, slice),
      );
    }
    return ids.length;
  }

  async footprint(): Promise<RecordFootprint> {
    const records = await this.count();
    const bytes = await this.redis.run('connlog footprint', (c) => scripted(c).rotorConnlogHeld(this.rec, this.held));
    return { records, bytes: Number(bytes) };
  }

  async count(): Promise<number> {
    return this.redis.run('connlog count', (c) => c.zcard(this.idx));
  }
}
