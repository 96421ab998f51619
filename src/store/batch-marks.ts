// A writer's batches (the quota meters' flushes, the connection log's units) carry an id the store takes in the
// same unit of work as the increments, so a write that landed although its writer saw it fail (a reply lost past
// the command timeout) and is written again adds nothing. An id is `<writer><seq>`: the writer's name (unique
// across daemons and restarts) and a sequence number it only ever increases, its batches written in that order (a
// failed one is written again as it was before anything newer). The store keeps one mark per writer, the last
// (seq, part) it took, not one row per batch: a batch at or below the mark was taken. So a batch retried after an
// outage of any length is recognised (the ids of one hour kept before counted a write twice once the outage outlasted
// them), in space bounded by the writers: a writer's mark goes BATCH_WRITER_TTL_MS after its last write (a process
// that stopped writes no more; one that lives on refreshes its mark with every write).
import { randomBytes } from 'node:crypto';
import { StoreError } from './errors.ts';

/** How long a writer's mark outlives its last write: the longest store outage a writer retries across exactly. */
export const BATCH_WRITER_TTL_MS = 30 * 86_400_000;

/** A batch id's writer and sequence number. */
export interface BatchId {
  writer: string;
  seq: number;
}

/** `<writer><seq>`: the trailing decimal digits are the sequence number, the rest the writer. */
export function parseBatchId(id: string): BatchId {
  const m = /^(.*\D)?(\d{1,15})$/s.exec(id);
  if (m === null || m[1] === undefined)
    throw new StoreError('STORE_INVALID', `batch id ${JSON.stringify(id)}: not <writer><sequence number>`);
  return { writer: m[1], seq: Number(m[2]) };
}

/** A writer's ids: a random name of its own (unique across daemons and restarts) and 1, 2, 3, … */
export function batchIds(): () => string {
  const writer = `${randomBytes(6).toString('base64url')}.`;
  let n = 0;
  return () => `${writer}${++n}`;
}

/**
 * Lua: `taken(marks, ats, mark)`: whether a batch was taken before, by its writer's mark in the hash `marks`
 * (writer -> "seq part"), else marks it (its time in the zset `ats`, by which the marks of writers silent for
 * BATCH_WRITER_TTL_MS go, a hundred at a time). The marks' times are Redis's own (TIME), one clock for the whole
 * fleet: a daemon's clock off by more than BATCH_WRITER_TTL_MS (a host without NTP, a VM restored from a snapshot)
 * neither removes the other writers' marks (ahead) nor has its own removed by theirs (behind). `mark`: "<seq> <part> <writer>" (redisBatchMark). Its first write
 * is the script's first: a script whose inputs were checked before cannot fail after it (a server out of memory
 * refuses a script's first write only).
 */
export const BATCH_MARK_LUA = `
local function taken(marks, ats, mark)
  local seq, part, writer = string.match(mark, '^(%d+) (%d+) (.*)$')
  local had = redis.call('HGET', marks, writer)
  if had then
    local s, p = string.match(had, '^(%d+) (%d+)$')
    s, p = tonumber(s), tonumber(p)
    local q, r = tonumber(seq), tonumber(part)
    if q < s or (q == s and r <= p) then return true end
  end
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('HSET', marks, writer, seq .. ' ' .. part)
  redis.call('ZADD', ats, now, writer)
  local old = redis.call('ZRANGEBYSCORE', ats, '-inf', now - ${BATCH_WRITER_TTL_MS}, 'LIMIT', 0, 100)
  if #old > 0 then
    redis.call('HDEL', marks, unpack(old))
    redis.call('ZREM', ats, unpack(old))
  end
  return false
end
`;

/** BATCH_MARK_LUA's `mark` argument for a batch's part ('' when the batch has no id). */
export function redisBatchMark(id: string | undefined, part = 0): string {
  if (id === undefined) return '';
  const { writer, seq } = parseBatchId(id);
  return `${seq} ${part} ${writer}`;
}
