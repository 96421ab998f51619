// The static instances as the gateway's InstanceDirectory: the gateway asks synchronously on every
// `-instance-<instanceNo>` connection, so the running instances are kept in memory and refreshed from the
// store (which the tracker keeps current from callbacks and polling) on a short interval.
import type { Logger } from '../telemetry/logger.ts';
import type { InstanceStore } from '../store/types.ts';
import type { UpstreamNode } from '../pool/types.ts';
import { nodeOf } from './index.ts';

export interface InstanceDirectoryOptions {
  logger?: Logger;
  /** default 2000 ms */
  refreshMs?: number;
  now?: () => number;
}

/** A user's `instances` as a set (undefined or null: every running instance of the merchant). */
export type InstanceRights = (user: string) => ReadonlySet<string> | null | undefined;

export class InstanceDirectoryCache {
  private nodes = new Map<string, UpstreamNode>();
  private rights: InstanceRights | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly now: () => number;

  constructor(
    private readonly store: Pick<InstanceStore, 'listInstances'>,
    private readonly options: InstanceDirectoryOptions = {},
  ) {
    this.now = options.now ?? Date.now;
  }

  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => {
      this.refresh().catch((err: unknown) => this.options.logger?.warn({ err }, 'instance directory refresh failed'));
    }, this.options.refreshMs ?? 2000);
    this.timer.unref();
  }

  async refresh(): Promise<void> {
    const now = this.now();
    const next = new Map<string, UpstreamNode>();
    for (const inst of await this.store.listInstances({ statuses: [3] })) {
      const node = nodeOf(inst, now);
      if (node) next.set(inst.instanceNo, node);
    }
    this.nodes = next;
  }

  get(instanceNo: string): UpstreamNode | undefined {
    const node = this.nodes.get(instanceNo);
    if (node?.expiresAt !== undefined && node.expiresAt <= this.now()) return undefined;
    return node;
  }

  /**
   * Whether `user` may leave through `instanceNo`: a running instance of the merchant, and one of the user's
   * `instances` when the record names them (a static IP sold to one customer); a record without the field may
   * use every running instance.
   */
  allowed(user: string, instanceNo: string): boolean {
    if (!this.nodes.has(instanceNo)) return false;
    const mine = this.rights?.(user);
    return mine === undefined || mine === null || mine.has(instanceNo);
  }

  /** Where a user's `instances` are read (the users directory, given once both are assembled). */
  useRights(rights: InstanceRights): void {
    this.rights = rights;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
