// Which pool drew a node: a node object belongs to the one pool that drew it (a redraw replaces the object),
// so warm upstream connections (src/proxy/warm.ts) can bound themselves per pool and follow its product's
// policy without a lookup on the data path.
import type { PoolKey, UpstreamNode } from './types.ts';

const owners = new WeakMap<UpstreamNode, PoolKey>();

export function setNodeOwner(node: UpstreamNode, key: PoolKey): void {
  owners.set(node, key);
}

/** The key of the pool that drew `node`; undefined for nodes no pool drew (static instances, tests). */
export function nodeOwner(node: UpstreamNode): PoolKey | undefined {
  return owners.get(node);
}
