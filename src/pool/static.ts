// A source with one fixed node: the static instance behind an `-instance-<instanceNo>` route (Router keeps
// one per instance dialed). There is no other node to fall back to, so failures are recorded (admin view,
// and the same marking a pool's node gets: a stall past the hedge delay counts) but never withhold the node.
import type { PoolSnapshot } from './pool.ts';
import { PoolEmptyError, type FailureReason, type NodeSource, type UpstreamNode } from './types.ts';

export interface StaticSnapshot {
  id: string;
  nodeId: string;
  activeConnections: number;
  consecutiveFailures: number;
  lastFailure?: FailureReason;
  lastFailedAt?: number;
}

export class StaticPool implements NodeSource {
  private active = 0;
  private failures = 0;
  private lastFailure: FailureReason | undefined;
  private lastFailedAt = 0;

  constructor(
    /** e.g. `instance/<instanceNo>` */
    readonly id: string,
    private node: UpstreamNode,
    private readonly now: () => number = Date.now,
  ) {}

  /** The instance changed address or credentials (change-proxy, password reset). */
  setNode(node: UpstreamNode): void {
    this.node = node;
    this.failures = 0;
    this.lastFailure = undefined;
  }

  get current(): UpstreamNode {
    return this.node;
  }

  async acquire(exclude?: ReadonlySet<string>): Promise<UpstreamNode> {
    return this.acquireNow(exclude);
  }

  acquireNow(exclude?: ReadonlySet<string>): UpstreamNode {
    if (exclude?.has(this.node.id)) throw new PoolEmptyError(this.id, 'the instance is the only upstream and it already failed');
    this.active++;
    return this.node;
  }

  release(node: UpstreamNode): void {
    if (node.id === this.node.id && this.active > 0) this.active--;
  }

  reportFailure(node: UpstreamNode, reason: FailureReason): void {
    if (node.id !== this.node.id || reason === 'target_refused') return;
    this.failures++;
    this.lastFailure = reason;
    this.lastFailedAt = this.now();
  }

  reportSuccess(node: UpstreamNode): void {
    if (node.id === this.node.id) this.failures = 0;
  }

  isUsable(node: UpstreamNode): boolean {
    return node.id === this.node.id && (node.expiresAt === undefined || node.expiresAt > this.now());
  }

  snapshot(): StaticSnapshot {
    const s: StaticSnapshot = { id: this.id, nodeId: this.node.id, activeConnections: this.active, consecutiveFailures: this.failures };
    if (this.lastFailure) s.lastFailure = this.lastFailure;
    if (this.lastFailedAt > 0) s.lastFailedAt = this.lastFailedAt;
    return s;
  }

  /** The instance in the shape of GET /v1/pools (one node, never withheld: `state` stays 'ready'). */
  poolSnapshot(): PoolSnapshot {
    const n = this.node;
    return {
      id: this.id,
      key: { user: '', productNo: '', region: '' },
      strategy: 'round_robin',
      ready: 1,
      cooling: 0,
      drawing: false,
      nodes: [
        {
          id: n.id,
          protocol: n.protocol,
          host: n.host,
          port: n.port,
          source: n.source,
          state: 'ready',
          fails: this.failures,
          activeConnections: this.active,
          ...(this.lastFailedAt > 0 ? { lastFailedAt: this.lastFailedAt } : {}),
        },
      ],
    };
  }
}
