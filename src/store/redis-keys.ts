// Where each record lives in Redis. Every key starts with the configured prefix (default `rotor:`); record
// keys and index keys use different first segments so no record id can ever name an index.
// Layout (P = prefix):
//   P o:<appOrderNo>          hash   one order (absent field = null)
//   P orders:all / :open      set    appOrderNos (open = not in a final status)
//   P orders:no               hash   platform orderNo -> appOrderNo
//   P instances               hash   instanceNo -> instance JSON
//   P j:<merchantNo>          hash   one journal entry
//   P journal:all / :state:<s> set   merchantNos
//   P cb:<[type,no,op]>       hash   one callback; P callbacks:all / :unprocessed sets; P callbacks:seq counter
//   P u:<user>                hash   used, limit, updatedAt (bytes; limit -1 = unlimited)
//   P usage:all               set    users
//   P usage:changed           zset   user -> version of its row's last write (the usage change feed)
//   P usage:version           string counter every usage write takes its version from
//   P usage:writers           hash   meter flush writer -> "seq part", the last batch part it wrote (batch-marks.ts)
//   P usage:writers:at        zset   meter flush writer -> its last write (store clock, ms): marks go BATCH_WRITER_TTL_MS after
//   P kv                      hash   key -> JSON
//   P usr:<name>              hash   one user record (data JSON, passwordHash, state, version, updatedAt)
//   P users:live / :gone      zset   name -> version of its last write / of its deletion
//   P users:version           string counter every user write and delete takes its version from
//   P allow:<user>            hash   fleet allowance: instance id -> bytes leased (redis-fleet-allowance.ts)
//   P allow-acked:<user>      hash   fleet allowance: reporter (instance:epoch) -> cumulative bytes applied
//   P alive:<instance>        string an instance's heartbeat (PX ttl); its leases die with it
//   P daemons                 zset   live instances -> heartbeat expiry (ms): how many share an outage
//   P epoch                   string a random id the first daemon writes into an empty Redis: a new one
//                                    means Redis lost the fleet's data and the daemons rebuild it
//   P sess:<user>:<sessionId> string shared sticky session (redis-fleet-sessions.ts)
//   P lease:<name>            string generic lease (redis-fleet-leases.ts)
//   P ev:*, P events:*, P evm:* the event outbox (src/store/redis-events.ts)

export const DEFAULT_REDIS_PREFIX = 'rotor:';

export class RedisKeys {
  constructor(readonly prefix: string = DEFAULT_REDIS_PREFIX) {}

  order(appOrderNo: string): string {
    return `${this.prefix}o:${appOrderNo}`;
  }
  get ordersAll(): string {
    return `${this.prefix}orders:all`;
  }
  get ordersOpen(): string {
    return `${this.prefix}orders:open`;
  }
  get orderNumbers(): string {
    return `${this.prefix}orders:no`;
  }
  get instances(): string {
    return `${this.prefix}instances`;
  }
  journal(merchantNo: string): string {
    return `${this.prefix}j:${merchantNo}`;
  }
  get journalAll(): string {
    return `${this.prefix}journal:all`;
  }
  journalState(state: string): string {
    return `${this.prefix}journal:state:${state}`;
  }
  callbackId(type: string, no: string, op: string): string {
    return JSON.stringify([type, no, op]);
  }
  callback(id: string): string {
    return `${this.prefix}cb:${id}`;
  }
  get callbacksAll(): string {
    return `${this.prefix}callbacks:all`;
  }
  get callbacksUnprocessed(): string {
    return `${this.prefix}callbacks:unprocessed`;
  }
  get callbacksSeq(): string {
    return `${this.prefix}callbacks:seq`;
  }
  usage(user: string): string {
    return `${this.prefix}u:${user}`;
  }
  get usageAll(): string {
    return `${this.prefix}usage:all`;
  }
  get usageChanged(): string {
    return `${this.prefix}usage:changed`;
  }
  get usageVersion(): string {
    return `${this.prefix}usage:version`;
  }
  get usageWriters(): string {
    return `${this.prefix}usage:writers`;
  }
  get usageWritersAt(): string {
    return `${this.prefix}usage:writers:at`;
  }
  get kv(): string {
    return `${this.prefix}kv`;
  }
  user(name: string): string {
    return `${this.prefix}usr:${name}`;
  }
  get usersLive(): string {
    return `${this.prefix}users:live`;
  }
  get usersGone(): string {
    return `${this.prefix}users:gone`;
  }
  get usersVersion(): string {
    return `${this.prefix}users:version`;
  }
  allowance(user: string): string {
    return `${this.prefix}allow:${user}`;
  }
  allowanceAcked(user: string): string {
    return `${this.prefix}allow-acked:${user}`;
  }
  alive(instance: string): string {
    return `${this.prefix}alive:${instance}`;
  }
  get daemons(): string {
    return `${this.prefix}daemons`;
  }
  get epoch(): string {
    return `${this.prefix}epoch`;
  }
  get aliveBase(): string {
    return `${this.prefix}alive:`;
  }
  session(user: string, sessionId: string): string {
    return `${this.prefix}sess:${user}:${sessionId}`;
  }
  lease(name: string): string {
    return `${this.prefix}lease:${name}`;
  }
}
