// The fleet allowance's shared counters in Redis (src/fleet/allowance.ts holds the leasing logic on top):
// one Lua script moves what a daemon spent from its lease into the user's `used` and grants the next slice
// (for up to a few hundred users per call), so `used + Σ leases ≤ limit` holds in Redis at every moment; a MULTI heartbeat keeps a daemon's leases
// its own while it has nothing to sync.
import type { Redis } from 'ioredis';
import type { AllowanceGrant, AllowanceStore, AllowanceSync } from './fleet-state.ts';
import type { RedisConnection } from './redis-connection.ts';
import { DEFAULT_REDIS_PREFIX, RedisKeys } from './redis-keys.ts';
import { callScript, defineScripts } from './redis-scripts.ts';

// Many users' syncs in one script call (one daemon's, in order: each as if run alone, back to back; nothing of
// another client runs between them): a start or a round that syncs every user sends 100,000 users in 500 calls
// rather than 100,000, each of which cost the daemon ~0.2 ms of CPU (a command object, a write, a reply).
// KEYS: usage:all set, the fleet's epoch, the live daemons (zset instance -> heartbeat expiry ms), the usage
// feed's counter and changed zset (a call that writes users' rows gives them one new version), then per
// user its usage hash (used, limit), allowance hash (instance -> leased) and acked hash (reporter ->
// cumulative bytes applied).
// ARGV: instance, alive key prefix, alive ttl ms, now, reporter (instance:epoch), acked ttl ms, a new epoch id
// (used only when Redis has none), then the users' fields as one JSON array of strings, 8 per user: user,
// reported (cumulative bytes this reporter has spent, adopted usage included), want (lease to hold after: top
// up to it, or give back down to it), seed limit ('' = none), seed used (the fleet's `used` this daemon last
// saw), acked (the cumulative figure this reporter last saw applied), final ('1': the reporter's last sync,
// forget it), seed epoch (the fleet epoch `seed used` was seen in; '' = none). One argument instead of 8 per
// user: ioredis builds and writes each argument on the daemon's event loop (a start's 100,000 leases: 800,000
// of them), cjson decodes the array in C; the fields stay strings, exactly the arguments they were.
// Returns {epoch, daemons, then per user: held, granted, limit, used, seeded, others}; granted -1 and held 0
// for an unlimited user. `seeded` 1: the usage record was missing (Redis came back empty) and was rebuilt
// from this daemon's last view. `others`: bytes leased by the other live daemons; `daemons`: how many are live.
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
const SYNC_MANY = `
local inst, alivePrefix, ttl, now, reporter, ackedTtl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local epoch = redis.call('GET', KEYS[2])
if not epoch then
  epoch = ARGV[7]
  redis.call('SET', KEYS[2], epoch)
end
redis.call('SET', alivePrefix .. inst, '1', 'PX', ttl)
redis.call('ZADD', KEYS[3], tonumber(now) + tonumber(ttl), inst)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local daemons = redis.call('ZCARD', KEYS[3])
-- Whether another daemon's heartbeat is live, asked once per call (not once per user and daemon).
local alive = {}
local out = {epoch, daemons}
local version = nil
local U = cjson.decode(ARGV[8])
local function changed(user)
  if not version then version = redis.call('INCR', KEYS[4]) end
  redis.call('ZADD', KEYS[5], version, user)
end
for k = 6, #KEYS, 3 do
  local usageKey, allowKey, ackedKey = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  local a = 1 + (k - 6) / 3 * 8
  local user, want, seedLimit, seedEpoch = U[a], tonumber(U[a + 2]), U[a + 3], U[a + 7]
  local seeded = 0
  if seedLimit ~= '' and redis.call('HEXISTS', usageKey, 'limit') == 0 then
    redis.call('HSET', usageKey, 'limit', seedLimit, 'updatedAt', now)
    redis.call('HSETNX', usageKey, 'used', 0)
    redis.call('SADD', KEYS[1], user)
    changed(user)
    seeded = 1
  end
  if seedEpoch ~= '' and seedEpoch ~= epoch then
    local seed = tonumber(U[a + 4])
    local prev = 0
    if redis.call('HGET', usageKey, 'seedEpoch') == epoch then prev = tonumber(redis.call('HGET', usageKey, 'seed') or '0') end
    if seed > prev then
      redis.call('HINCRBY', usageKey, 'used', seed - prev)
      redis.call('HSETNX', usageKey, 'limit', -1)
      redis.call('HSET', usageKey, 'seed', seed, 'seedEpoch', epoch, 'updatedAt', now)
      redis.call('SADD', KEYS[1], user)
      changed(user)
      seeded = 1
    end
  end
  local base = tonumber(redis.call('HGET', ackedKey, reporter) or U[a + 5])
  local spent = tonumber(U[a + 1]) - base
  if spent < 0 then spent = 0 end
  if U[a + 6] == '1' then redis.call('HDEL', ackedKey, reporter)
  elseif spent > 0 or redis.call('HEXISTS', ackedKey, reporter) == 0 then
    redis.call('HSET', ackedKey, reporter, U[a + 1])
    redis.call('PEXPIRE', ackedKey, ackedTtl)
  end
  local mine = tonumber(redis.call('HGET', allowKey, inst) or '0')
  if spent > 0 then
    redis.call('HINCRBY', usageKey, 'used', spent)
    redis.call('HSETNX', usageKey, 'limit', -1)
    redis.call('HSET', usageKey, 'updatedAt', now)
    redis.call('SADD', KEYS[1], user)
    changed(user)
    mine = mine - math.min(spent, mine)
  end
  local others = 0
  local all = redis.call('HGETALL', allowKey)
  for i = 1, #all, 2 do
    local other = all[i]
    if other ~= inst then
      local live = alive[other]
      if live == nil then
        live = redis.call('EXISTS', alivePrefix .. other) == 1
        alive[other] = live
      end
      if live then others = others + tonumber(all[i + 1]) else redis.call('HDEL', allowKey, other) end
    end
  end
  local limit = tonumber(redis.call('HGET', usageKey, 'limit') or '-1')
  local used = tonumber(redis.call('HGET', usageKey, 'used') or '0')
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
  if mine > 0 then redis.call('HSET', allowKey, inst, mine) else redis.call('HDEL', allowKey, inst) end
  out[#out + 1] = mine
  out[#out + 1] = granted
  out[#out + 1] = limit
  out[#out + 1] = used
  out[#out + 1] = seeded
  out[#out + 1] = others
end
return out
`;
/** A number as ioredis writes an argument (an integer beyond 2^53 in full digits, not in exponent form). */
const asArg = (n: number): string => (Number.isInteger(n) && !Number.isSafeInteger(n) ? BigInt(n).toString() : String(n));

/** Numbers per user in SYNC_MANY's reply, after its epoch and daemons. */
const PER_USER = 6;
const SCRIPTS = { rotorAllowanceSyncMany: { lua: SYNC_MANY } };
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

  sync(q: AllowanceSync): Promise<AllowanceGrant> {
    return this.syncMany([q]).then((r) => r[0] as AllowanceGrant);
  }

  /**
   * One daemon's syncs in one script call, applied in order: instance, reporter, aliveTtlMs, now and newEpoch
   * are the first request's (the leaser sends one batch with one clock reading).
   */
  async syncMany(qs: readonly AllowanceSync[]): Promise<AllowanceGrant[]> {
    const first = qs[0];
    if (first === undefined) return [];
    const keys: string[] = [this.keys.usageAll, this.keys.epoch, this.keys.daemons, this.keys.usageVersion, this.keys.usageChanged];
    const args: (string | number)[] = [
      first.instance,
      this.keys.aliveBase,
      first.aliveTtlMs,
      first.now,
      first.reporter,
      ACKED_TTL_MS,
      first.newEpoch,
    ];
    // The users' fields as strings, as ioredis made of them when each was an argument of its own.
    const fields: string[] = [];
    for (const q of qs) {
      keys.push(this.keys.usage(q.user), this.keys.allowance(q.user), this.keys.allowanceAcked(q.user));
      fields.push(
        q.user,
        asArg(q.reported),
        asArg(Math.max(0, Math.floor(q.want))),
        q.seedLimit === null ? '' : asArg(Math.trunc(q.seedLimit)),
        asArg(Math.max(0, Math.trunc(q.seedUsed))),
        asArg(q.acked),
        q.final ? '1' : '0',
        q.seedEpoch,
      );
    }
    args.push(JSON.stringify(fields));
    const what = qs.length === 1 ? `allowance of ${first.user}` : `allowance of ${qs.length} users`;
    const r = (await this.connection.run(what, (c: Redis) => callScript(c, 'rotorAllowanceSyncMany', [keys.length, ...keys, ...args]))) as (
      string | number
    )[];
    const epoch = String(r[0]);
    const daemons = Number(r[1]);
    const out: AllowanceGrant[] = new Array<AllowanceGrant>(qs.length);
    for (let i = 0, at = 2; i < qs.length; i++, at += PER_USER) {
      out[i] = {
        held: r[at] as number,
        granted: r[at + 1] as number,
        limit: r[at + 2] as number,
        used: r[at + 3] as number,
        seeded: r[at + 4] === 1,
        epoch,
        others: r[at + 5] as number,
        daemons,
      };
    }
    return out;
  }
}
