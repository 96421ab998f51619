// The Lua scripts of the Redis store (src/store/redis.ts registers and calls them): every write that reads
// before it writes is one script, so two daemons racing see the outcome SQLite's transactions give one.
// A script fails with an error reply starting `ROTOR_<CODE>` (redis-connection.ts turns it into StoreError).
import { BATCH_MARK_LUA } from './batch-marks.ts';
import type { Redis } from 'ioredis';
import { StoreError } from './errors.ts';

type ScriptCaller = (...args: (string | number)[]) => Promise<unknown>;

// KEYS: order hash, orderNo index, all set, open set.
// ARGV: appOrderNo, orderNo ('' with hasNo 0 = null), hasNo, open, createdAt, n, n field/value pairs, fields to delete...
export const PUT_ORDER = `
local a, newNo, hasNo = ARGV[1], ARGV[2], ARGV[3] == '1'
if hasNo then
  local owner = redis.call('HGET', KEYS[2], newNo)
  if owner and owner ~= a then return redis.error_reply('ROTOR_CONFLICT order number ' .. newNo .. ' already belongs to another order') end
end
local oldNo = redis.call('HGET', KEYS[1], 'orderNo')
if oldNo and ((not hasNo) or oldNo ~= newNo) then redis.call('HDEL', KEYS[2], oldNo) end
if hasNo then redis.call('HSET', KEYS[2], newNo, a) end
local n = tonumber(ARGV[6])
local fv = {}
for i = 7, 6 + 2 * n do fv[#fv + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fv))
for i = 7 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
redis.call('HSETNX', KEYS[1], 'createdAt', ARGV[5])
redis.call('SADD', KEYS[3], a)
if ARGV[4] == '1' then redis.call('SADD', KEYS[4], a) else redis.call('SREM', KEYS[4], a) end
return 1
`;

// A page of a listing: each key's hash as HGETALL gives it (empty when the key is missing), in KEYS' order.
// One call per page instead of one HGETALL per record: a restart at 100,000 users made 100,000+ command
// objects and replies in ioredis (2 s of its CPU), now a few hundred. The page is one JSON text (an array of
// the flat field/value arrays; a missing key's empty table encodes as {}): one bulk string for ioredis to
// decode instead of ~7 per usage row and ~11 per user record, which the daemon's JSON.parse reads at a
// fraction of ioredis' per-element cost (the start's largest share after the collector).
export const HASHES = `
local out = {}
for i = 1, #KEYS do out[i] = redis.call('HGETALL', KEYS[i]) end
return cjson.encode(out)
`;

// The usage change feed: the users whose rows the same MULTI wrote take one new version (a reader asks for
// the names above the version it last read). KEYS: version counter, changed zset. ARGV: users.
export const USAGE_CHANGED = `
local v = redis.call('INCR', KEYS[1])
for i = 1, #ARGV do redis.call('ZADD', KEYS[2], v, ARGV[i]) end
return v
`;

// A flush of the quota meters (addUsage): the batch's writer mark, every row's increment and the usage change
// feed's entry (as USAGE_CHANGED) in one script, so a batch written again after its answer was lost adds nothing.
// KEYS: the writers' marks hash, the users set, the version counter, the changed zset, the marks' times zset, then
// one usage hash per delta. ARGV: the batch part's mark ('' none: redisBatchMark), now (the rows' updatedAt; the
// mark is timed by Redis's TIME), then per delta: user,
// bytes (checked before the call: HINCRBY cannot fail on them). Returns 0 when the part was taken before, else 1.
// Nothing can fail after its first write (the mark): every key's type, the counter's and every row's `used` value
// are checked first (WRONGTYPE reply, nothing written, mark included), so a part fails whole and stays failing
// (the accounting keeps and logs it) instead of being marked taken with the rows after a bad key never added.
export const ADD_USAGE = `${BATCH_MARK_LUA}
local function wrong(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then return key .. ' holds a ' .. t .. ', not a ' .. want end
  return nil
end
local bad = wrong(KEYS[1], 'hash') or wrong(KEYS[2], 'set') or wrong(KEYS[3], 'string') or wrong(KEYS[4], 'zset')
  or wrong(KEYS[5], 'zset')
local version = not bad and redis.call('GET', KEYS[3])
if version and not string.match(version, '^%-?%d+$') then bad = KEYS[3] .. ' is not a whole number' end
for j = 6, #KEYS do
  if bad then break end
  bad = wrong(KEYS[j], 'hash')
  local used = not bad and redis.call('HGET', KEYS[j], 'used')
  if used and not string.match(used, '^%-?%d+$') then bad = KEYS[j] .. ' used is not a whole number' end
end
if bad then return redis.error_reply('WRONGTYPE quota meters: ' .. bad .. ' (nothing written)') end
if ARGV[1] ~= '' and taken(KEYS[1], KEYS[5], ARGV[1]) then return 0 end
local v = redis.call('INCR', KEYS[3])
for j = 1, #KEYS - 5 do
  local key, user = KEYS[5 + j], ARGV[1 + 2 * j]
  redis.call('HINCRBY', key, 'used', ARGV[2 + 2 * j])
  redis.call('HSETNX', key, 'limit', -1)
  redis.call('HSET', key, 'updatedAt', ARGV[2])
  redis.call('SADD', KEYS[2], user)
  redis.call('ZADD', KEYS[4], v, user)
end
return 1
`;

// KEYS: entry hash, all set, intent set. ARGV: merchantNo, operation, request, reqId, now.
export const ADD_INTENT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('ROTOR_CONFLICT journal entry ' .. ARGV[1] .. ' already exists') end
redis.call('HSET', KEYS[1], 'operation', ARGV[2], 'request', ARGV[3], 'reqId', ARGV[4], 'state', 'intent', 'result', 'null',
  'attempts', 0, 'createdAt', ARGV[5], 'updatedAt', ARGV[5])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
return 1
`;

// KEYS: entry hash. ARGV: merchantNo, state, hasResult, result, orderNoMode (0 keep, 1 set, 2 null), orderNo,
// sent (0/1), now, state-set key prefix.
export const UPDATE_JOURNAL = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local old = redis.call('HGET', KEYS[1], 'state')
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'updatedAt', ARGV[8])
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'result', ARGV[4]) end
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'orderNo', ARGV[6]) elseif ARGV[5] == '2' then redis.call('HDEL', KEYS[1], 'orderNo') end
if ARGV[7] == '1' then redis.call('HINCRBY', KEYS[1], 'attempts', 1) end
if old ~= ARGV[2] then
  if old then redis.call('SREM', ARGV[9] .. old, ARGV[1]) end
  redis.call('SADD', ARGV[9] .. ARGV[2], ARGV[1])
end
return 1
`;

// KEYS: callback hash, all set, unprocessed set, seq counter. ARGV: id, type, no, op, receivedAt.
export const RECORD_CALLBACK = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'count', 1)
  return {1, tonumber(redis.call('HGET', KEYS[1], 'processed'))}
end
local seq = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[1], 'type', ARGV[2], 'no', ARGV[3], 'op', ARGV[4], 'receivedAt', ARGV[5], 'count', 1, 'processed', 0, 'seq', seq)
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
return {0, 0}
`;

// KEYS: callback hash, unprocessed set. ARGV: id.
export const MARK_CALLBACK = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'processed', 1)
redis.call('SREM', KEYS[2], ARGV[1])
return 1
`;

// One user write: the record's hash, the live and gone zsets, the version counter; the name, data, password
// hash, state, now, mode ('' none, 'absent', 'version') and expected version. Returns the version written, or
// a conflict's message (nothing written).
const PUT_ONE_USER = `
local function putUser(key, live, gone, counter, name, data, hash, state, now, mode, expected)
  local exists = redis.call('EXISTS', key) == 1
  if mode == 'absent' and exists then return nil, 'ROTOR_CONFLICT user ' .. name .. ' exists' end
  if mode == 'version' then
    local v = exists and redis.call('HGET', key, 'version') or '-1'
    if v ~= expected then return nil, 'ROTOR_CONFLICT user ' .. name .. ' changed meanwhile' end
  end
  local version = redis.call('INCR', counter)
  redis.call('HSET', key, 'data', data, 'passwordHash', hash, 'state', state, 'version', version, 'updatedAt', now)
  redis.call('ZADD', live, version, name)
  redis.call('ZREM', gone, name)
  return version
end
`;

// KEYS: user hash, live zset, gone zset, version counter. ARGV: name, data, passwordHash, state, now,
// mode ('' none, 'absent', 'version'), expected version.
export const PUT_USER = `${PUT_ONE_USER}
local version, conflict = putUser(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
if conflict then return redis.error_reply(conflict) end
return version
`;

// Many user writes as one script (nothing of another client runs between them), in order, as SQLite's one
// transaction. KEYS: live zset, gone zset, version counter, then each write's user hash. ARGV: now, then per
// write: name, data, passwordHash, state, mode, expected version. Returns per write its version, or 0 for a
// conflict (that write alone is not made).
export const PUT_USERS = `${PUT_ONE_USER}
local out = {}
for i = 4, #KEYS do
  local a = 2 + (i - 4) * 6
  local version = putUser(KEYS[i], KEYS[1], KEYS[2], KEYS[3], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[1], ARGV[a + 4], ARGV[a + 5])
  out[#out + 1] = version or 0
end
return out
`;

// A page of user records (usersChangedSince, listUsers, getUsers): per key, 0 when it is missing, else
// [data, passwordHash, state, version, updatedAt] with `data` spliced in as the JSON text it is stored as (every
// writer stores JSON.stringify's output: PUT_USER, PUT_USERS, RESTORE_USER), not as a string holding it. The
// daemon then parses each record once, with its page, instead of unescaping it as a string and parsing that
// again (100,000 records at a restart: ~0.2 s of the daemon's CPU and the strings' garbage). A text that is
// not JSON fails the page's parse, as its own parse failed the listing before.
// ARGV: the records' key prefix, then the page's names as one JSON array (each key is the prefix and a name): one
// argument per page instead of one per key, which the daemon's client built and wrote one by one (a restart at
// 100,000 users sent ~270,000 of them). The keys are made here, as UPDATE_JOURNAL makes its state sets' keys.
export const USER_PAGE = `
local prefix, ids = ARGV[1], cjson.decode(ARGV[2])
local out = {}
for i = 1, #ids do
  local key = prefix .. ids[i]
  local h = redis.call('HMGET', key, 'data', 'passwordHash', 'state', 'version', 'updatedAt')
  if h[1] or h[2] or h[3] or h[4] or h[5] or redis.call('EXISTS', key) == 1 then
    out[i] = '[' .. (h[1] or 'null') .. ',' .. cjson.encode(h[2] or '') .. ',' .. cjson.encode(h[3] or '') .. ',' ..
      cjson.encode(h[4] or '0') .. ',' .. cjson.encode(h[5] or '0') .. ']'
  else
    out[i] = '0'
  end
end
return '[' .. table.concat(out, ',') .. ']'
`;

// A page of usage rows (listUsage, usageChangedSince, getUsages): per key, 0 when it is missing, else
// [used, limit, updatedAt], each a JSON number when it is an integer's text (as HINCRBY and the writes leave
// it), else a JSON string (or null when absent), which Number() reads as it read the hash's field before.
// Three fields per row instead of every field of the hash as strings (the fleet's seed fields included).
// ARGV: as USER_PAGE's.
export const USAGE_PAGE = `
local function num(v)
  if v == false then return 'null' end
  if v == '0' or string.match(v, '^%-?[1-9]%d*$') then return v end
  return cjson.encode(v)
end
local prefix, ids = ARGV[1], cjson.decode(ARGV[2])
local out = {}
for i = 1, #ids do
  local key = prefix .. ids[i]
  local h = redis.call('HMGET', key, 'used', 'limit', 'updatedAt')
  if h[1] or h[2] or h[3] or redis.call('EXISTS', key) == 1 then
    out[i] = '[' .. num(h[1]) .. ',' .. num(h[2]) .. ',' .. num(h[3]) .. ']'
  else
    out[i] = '0'
  end
end
return '[' .. table.concat(out, ',') .. ']'
`;

// KEYS: user hash, live zset, gone zset, version counter. ARGV: name.
export const DELETE_USER = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('DEL', KEYS[1])
local version = redis.call('INCR', KEYS[4])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], version, ARGV[1])
return 1
`;

// Fleet rebuild (redis-fleet.ts restoreUsers): a user record a daemon still holds, put back into a Redis that lost it.
// KEYS: user hash, live zset, gone zset, version counter. ARGV: name, data, passwordHash, state, version, now.
// Not over a record of the same or a newer version (another daemon put back a newer copy, or the user was
// written since), nor over a deletion made since the loss (a tombstone). The version counter is raised to the
// version put back, so every write after the rebuild is newer than every record put back. Returns 1 when put.
export const RESTORE_USER = `
if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 0 end
local v = tonumber(ARGV[5])
local stored = tonumber(redis.call('HGET', KEYS[1], 'version') or '-1')
if stored >= v then return 0 end
if tonumber(redis.call('GET', KEYS[4]) or '0') < v then redis.call('SET', KEYS[4], v) end
redis.call('HSET', KEYS[1], 'data', ARGV[2], 'passwordHash', ARGV[3], 'state', ARGV[4], 'version', v, 'updatedAt', ARGV[6])
redis.call('ZADD', KEYS[2], v, ARGV[1])
return 1
`;

/** Registers Lua scripts on a client once (ioredis sends EVALSHA and falls back to EVAL itself). */
export function defineScripts(client: Redis, scripts: Record<string, { numberOfKeys?: number; lua: string }>): void {
  const defined = client as unknown as Record<string, unknown>;
  for (const [name, s] of Object.entries(scripts)) if (typeof defined[name] !== 'function') client.defineCommand(name, s);
}

/** Calls a script registered with defineScripts. */
export function callScript(client: Redis, name: string, args: (string | number)[]): Promise<unknown> {
  const fn = (client as unknown as Record<string, ScriptCaller>)[name];
  if (typeof fn !== 'function') throw new StoreError('STORE_FAILED', `script ${name} is not defined`);
  return fn.apply(client, args);
}
