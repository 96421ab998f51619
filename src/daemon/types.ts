// What a started daemon offers its callers (the CLI, tests, benchmarks) and the options they may inject.
import type { Accounting } from '../accounting/accounting.ts';
import type { Config } from '../config/schema.ts';
import type { ConnectionLogService } from '../connlog/index.ts';
import type { Events, QuotaWatcher, WebhookDelivery } from '../events/index.ts';
import type { Fleet } from '../fleet/index.ts';
import type { Orders } from '../orders/index.ts';
import type { PoolRegistry } from '../pool/registry.ts';
import type { SessionTable } from '../session/table.ts';
import type { Simulator } from '../sim/index.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Users } from '../users/directory.ts';
import type { UserPorts } from '../users/ports.ts';
import type { SandboxOptions } from './platform.ts';

export interface DaemonOptions {
  logger?: Logger;
  metrics?: Metrics;
  /** Embedded mode: options for the in-process sandbox (tests speed its clock up). */
  sim?: SandboxOptions;
  /** The gateway's clock (sticky sessions, pools, dial deadlines); tests move it to expire sessions. */
  now?: () => number;
  /** Connection ids (tests inject a sequence); default random prefix + counter. */
  connectionIds?: () => string;
}

export interface Daemon {
  readonly config: Config;
  readonly ports: { http: number; socks5: number; admin: number; callback: number; https?: number; portal?: number | undefined };
  readonly platform: { baseUrl: string; appKey: string };
  /** The in-process sandbox in embedded mode. */
  readonly sim: Simulator | undefined;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly accounting: Accounting;
  readonly orders: Orders;
  readonly sessions: SessionTable;
  readonly pools: PoolRegistry;
  /** The users directory (users as data). */
  readonly users: Users;
  /** Fleet mode (`store.path: redis://…`): the shared allowance, sessions and leases; undefined with SQLite. */
  readonly fleet: Fleet | undefined;
  /** The event outbox, its webhook worker (when events.webhookUrl is set) and the quota watcher (src/events/). */
  readonly events: { outbox: Events; delivery: WebhookDelivery | undefined; quota: QuotaWatcher };
  /** Users' own ports (`listen`), kept in step with the users (src/users/ports.ts). */
  readonly userPorts: UserPorts;
  /** The connection log: live connections, records, usage rollups. */
  readonly connections: ConnectionLogService;
  /** Applies a new config (users, limits, pools) without dropping live connections. */
  reload(next: Config): Promise<void>;
  /** Stop accepting, drain live connections up to `drainMs`, flush counters, close everything. */
  close(drainMs?: number): Promise<void>;
}
