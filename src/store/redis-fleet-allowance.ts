// The fleet allowance's shared counters in Redis (src/fleet/allowance.ts holds the leasing logic on top):
// one Lua script moves what a daemon spent from its lease into the user's `used` and grants the next slice,
// so `used + Σ leases ≤ limit` holds in Redis at every moment; a MULTI heartbeat keeps a daemon's leases
// its own while it has nothing to sync.
import type { Redis } from 'ioredis';
import type { AllowanceGrant, AllowanceStore, AllowanceSync } from './fleet-state.ts';
import type { RedisConnection } from './redis-connection.ts';
import { DEFAULT_REDIS_PREFIX, RedisKeys } from './redis-keys.ts';
import { callScript, defineScripts } from './redis-scripts.ts';

// KEYS: usage hash (used, limit), allowance hash (instance -> leased), usage:all set, acked hash (reporter ->
// cumulative bytes applied), the fleet's epoch (a random id the first daemon writes into an empty Redis), the
// live daemons (zset instance -> heartbeat expiry ms).
// ARGV: instance, user, reported (cumulative bytes this reporter has spent, adopted usage included), want
// (lease to hold after: top up to it, or give back down to it), alive key prefix, alive ttl ms, now, seed
// limit ('' = none), seed used (the fleet's `used` this daemon last saw), reporter (instance:epoch), acked
// (the cumulative figure this reporter last saw applied), final ('1': the reporter's last sync, forget it),
// acked ttl ms, seed epoch (the fleet epoch `seed used` was seen in; '' = none), a new epoch id (used only
// when Redis has none).
// Returns {held, granted, limit, used, seeded, epoch, others, daemons}; granted -1 and held 0 for an
// unlimited user. `seeded` 1: the usage record was missing (Redis came back empty) and was rebuilt from
// this daemon's last view. `others`: bytes leased by the other live daemons; `daemons`: how many are live.
//
// Spending is reported as a cumulative figure, not a delta, so a sync is idempotent: a script that ran but
// whose reply was lost (a command timeout while Redis was stalled, a dropped connection) is followed by one
// reporting a cumulative figure that includes the same bytes, and only what lies beyond the figure already
// applied is added. Reporting deltas, the retry added them a second time (a billing double count).
//
// Rebuild after a loss (restart without persistence, FLUSHALL): the epoch key is gone, so the first sync
// writes a new one, and every daemon whose last view is from the old epoch folds that view in once: `used`
// only ever grows, so the latest view any daemon holds covers every byte applied before it, and the record
// keeps the highest view folded so far (`seed`): a daemon with a higher one adds only the difference, a
// lower one adds nothing. Each daemon then reports what it spent since its own last applied figure (its
// acked entry went with the rest, so `base` is what it last saw applied). So several daemons rebuilding at
// once count every byte once.
const SYNC = `
local inst, want = ARGV[1], tonumber(ARGV[4])
local seeded = 0
local epoch = redis.call('GET', KEYS[5])
if not epoch then
  epoch = ARGV[15]
  redis.call('SET', KEYS[5], epoch)
end
if ARGV[8] ~= '' and redis.call('HEXISTS', KEYS[1], 'limit') == 0 then
  redis.call('HSET', KEYS[1], 'limit', ARGV[8], 'updatedAt', ARGV[7])
  redis.call('HSETNX', KEYS[1], 'used', 0)
  redis.call('SADD', KEYS[3], ARGV[2])
  seeded = 1
end
if ARGV[14] ~= '' and ARGV[14] ~= epoch then
  local seed = tonumber(ARGV[9])
  local prev = 0
  if redis.call('HGET', KEYS[1], 'seedEpoch') == epoch then prev = tonumber(redis.call('HGET', KEYS[1], 'seed') or '0') end
  if seed > prev then
    redis.call('HINCRBY', KEYS[1], 'used', seed - prev)
    redis.call('HSETNX', KEYS[1], 'limit', -1)
    redis.call('HSET', KEYS[1], 'seed', seed, 'seedEpoch', epoch, 'updatedAt', ARGV[7])
    redis.call('SADD', KEYS[3], ARGV[2])
    seeded = 1
  end
end
local base = tonumber(redis.call('HGET', KEYS[4], ARGV[10]) or ARGV[11])
local spent = tonumber(ARGV[3]) - base
if spent < 0 then spent = 0 end
if ARGV[12] == '1' then redis.call('HDEL', KEYS[4], ARGV[10])
elseif spent > 0 or redis.call('HEXISTS', KEYS[4], ARGV[10]) == 0 then
  redis.call('HSET', KEYS[4], ARGV[10], ARGV[3])
  redis.call('PEXPIRE', KEYS[4], ARGV[13])
end
redis.call('SET', ARGV[5] .. inst, '1', 'PX', ARGV[6])
redis.call('ZADD', KEYS[6], tonumber(ARGV[7]) + tonumber(ARGV[6]), inst)
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', ARGV[7])
local daemons = redis.call('ZCARD', KEYS[6])
local mine = tonumber(redis.call('HGET', KEYS[2], inst) or '0')
if spent > 0 then
  redis.call('HINCRBY', KEYS[1], 'used', spent)
  redis.call('HSETNX', KEYS[1], 'limit', -1)
  redis.call('HSET', KEYS[1], 'updatedAt', ARGV[7])
  redis.call('SADD', KEYS[3], ARGV[2])
  mine = mine - math.min(spent, mine)
end
local others = 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  if all[i] ~= inst then
    if redis.call('EXISTS', ARGV[5] .. all[i]) == 0 then redis.call('HDEL', KEYS[2], all[i])
    else others = others + tonumber(all[i + 1]) end
  end
end
local limit = tonumber(redis.call('HGET', KEYS[1], 'limit') or '-1')
local used = tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
local granted = 0
if limit < 0 then
  mine = 0
  granted = -1
elseif want <= mine then
  mine = want
else
  local left = limit - used - others - mine
  if left > 0 then granted = math.min(want - mine, left) end
  mine = mine + granted
end
if mine > 0 then redis.call('HSET', KEYS[2], inst, mine) else redis.call('HDEL', KEYS[2], inst) end
return {mine, granted, limit, used, seeded, epoch, others, daemons}
`;
/** The sync's reply: held, granted, limit, used, seeded, epoch, others, daemons (see SYNC). */
type SyncReply = [number, number, number, number, number, string, number, number];
const SCRIPTS = { rotorAllowanceSync: { numberOfKeys: 6, lua: SYNC } };
/** How long a reporter's applied figure outlives its last sync (a crashed daemon never says `final`). */
const ACKED_TTL_MS = 7 * 86_400_000;

export class RedisAllowance implements AllowanceStore {
  private readonly keys: RedisKeys;

  constructor(
    private readonly connection: RedisConnection,
    prefix: string = DEFAULT_REDIS_PREFIX,
  ) {
    this.keys = new RedisKeys(prefix);
    defineScripts(connection.client, SCRIPTS);
  }

  async heartbeat(instance: string, aliveTtlMs: number, now: number, newEpoch: string): Promise<string | undefined> {
    const results = await this.connection.run('allowance heartbeat', (c: Redis) =>
      c
        .multi()
        .set(this.keys.aliveBase + instance, '1', 'PX', aliveTtlMs)
        .zadd(this.keys.daemons, now + aliveTtlMs, instance)
        .zremrangebyscore(this.keys.daemons, '-inf', now)
        .set(this.keys.epoch, newEpoch, 'NX')
        .get(this.keys.epoch)
        .exec(),
    );
    const epoch = results?.[4]?.[1];
    return typeof epoch === 'string' ? epoch : undefined;
  }

  async sync(q: AllowanceSync): Promise<AllowanceGrant> {
    const r = (await this.connection.run(`allowance of ${q.user}`, (c: Redis) =>
      callScript(c, 'rotorAllowanceSync', [
        this.keys.usage(q.user),
        this.keys.allowance(q.user),
        this.keys.usageAll,
        this.keys.allowanceAcked(q.user),
        this.keys.epoch,
        this.keys.daemons,
        q.instance,
        q.user,
        q.reported,
        Math.max(0, Math.floor(q.want)),
        this.keys.aliveBase,
        q.aliveTtlMs,
        q.now,
        q.seedLimit === null ? '' : Math.trunc(q.seedLimit),
        Math.max(0, Math.trunc(q.seedUsed)),
        q.reporter,
        q.acked,
        q.final ? '1' : '0',
        ACKED_TTL_MS,
        q.seedEpoch,
        q.newEpoch,
      ]),
    )) as SyncReply;
    return {
      held: r[0],
      granted: r[1],
      limit: r[2],
      used: r[3],
      seeded: r[4] === 1,
      epoch: String(r[5]),
      others: r[6],
      daemons: r[7],
    };
  }
}
