// Which pool drew a node: a node object belongs to the one pool that drew it (a redraw replaces the object),
// so warm upstream connections (src/proxy/warm.ts) can bound themselves per pool and follow its product's
// policy without a lookup on the data path.
import type { PoolKey, UpstreamNode } from './types.ts';

export interface NodeOwner {
  key: PoolKey;
  /** whether the pool's product allows connections opened ahead (PoolTuning.warm) */
  warm: boolean;
}

const owners = new WeakMap<UpstreamNode, NodeOwner>();

export function setNodeOwner(node: UpstreamNode, owner: NodeOwner): void {
  owners.set(node, owner);
}

/** The pool that drew `node`; undefined for nodes no pool drew (static instances, tests). */
export function nodeOwner(node: UpstreamNode): NodeOwner | undefined {
  return owners.get(node);
}
