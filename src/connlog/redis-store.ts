// The connection log for a fleet (store.path redis://…), on the store's Redis connection. Layout (P = the
// fleet prefix):
//   P connlog:idx              sorted set   record id, scored by startedAt (ties: Redis orders by member,
//                                           the same (startedAt, id) order SQLite's index gives)
//   P connlog:rec              hash         record id -> record JSON
//   P usage:<g>:<period>       hash         <user>|up, |down, |n, |f counters of one hour or day
//   P usage:<g>:periods        sorted set   the periods that have a hash, scored by period
// Bounded like SQLite: retention trims by age and by count (the oldest first). A batch is one MULTI.
// Filters (user, result) are applied while reading newest first, so a rare filter over a full log reads
// far: fleets that query the log heavily are better served by the JSON-lines file into a log system.
import type { RedisConnection } from '../store/redis-connection.ts';
import { foldRollups } from './rollup.ts';
import type {
  ConnectionLogStore,
  ConnectionQuery,
  ConnectionRecord,
  Granularity,
  RetentionLimits,
  UsageQuery,
  UsageRollup,
} from './types.ts';

/** Records read per round trip while filtering. */
const SCAN_PAGE = 500;

export class RedisConnectionLog implements ConnectionLogStore {
  private readonly idx: string;
  private readonly rec: string;

  constructor(
    private readonly redis: RedisConnection,
    private readonly prefix: string,
  ) {
    this.idx = `${prefix}connlog:idx`;
    this.rec = `${prefix}connlog:rec`;
  }

  private periods(g: Granularity): string {
    return `${this.prefix}usage:${g}:periods`;
  }

  private usageKey(g: Granularity, period: number): string {
    return `${this.prefix}usage:${g}:${period}`;
  }

  async append(records: readonly ConnectionRecord[], usage?: readonly UsageRollup[]): Promise<void> {
    if (records.length === 0 && (usage === undefined || usage.length === 0)) return;
    await this.redis.run('connlog append', async (c) => {
      const m = c.multi();
      for (const r of records) {
        m.zadd(this.idx, r.startedAt, r.id);
        m.hset(this.rec, r.id, JSON.stringify(r));
      }
      for (const u of usage ?? foldRollups(records)) {
        const key = this.usageKey(u.granularity, u.period);
        m.hincrby(key, `${u.user}|up`, u.bytesUp);
        m.hincrby(key, `${u.user}|down`, u.bytesDown);
        m.hincrby(key, `${u.user}|n`, u.connections);
        m.hincrby(key, `${u.user}|f`, u.failures);
        m.zadd(this.periods(u.granularity), u.period, String(u.period));
      }
      const answers = await m.exec();
      const failed = answers?.find(([err]) => err);
      if (failed) throw failed[0];
    });
  }

  async query(q: ConnectionQuery): Promise<ConnectionRecord[]> {
    const out: ConnectionRecord[] = [];
    const max = q.after ? q.after.startedAt : q.until !== undefined ? `(${q.until}` : '+inf';
    const min = q.since ?? '-inf';
    let offset = 0;
    while (out.length < q.limit) {
      const page = await this.redis.run('connlog query', (c) =>
        c.zrevrangebyscore(this.idx, max, min, 'WITHSCORES', 'LIMIT', offset, SCAN_PAGE),
      );
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
      await this.redis.run('connlog prune', async (c) => {
        await c
          .multi()
          .zrem(this.idx, ...slice)
          .hdel(this.rec, ...slice)
          .exec();
      });
    }
    return ids.length;
  }

  async count(): Promise<number> {
    return this.redis.run('connlog count', (c) => c.zcard(this.idx));
  }
}
