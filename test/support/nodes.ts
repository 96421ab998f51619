// Upstream nodes for tests that never dial them (pools, sessions, the prober's planning): a SOCKS5 node on
// loopback with fixed credentials, named by its port.
import type { UpstreamNode } from '../../src/pool/types.ts';

export function socksNode(port: number, expiresAt?: number): UpstreamNode {
  return {
    id: `socks5://u@127.0.0.1:${port}`,
    protocol: 'socks5',
    host: '127.0.0.1',
    port,
    username: 'u',
    password: 'pw',
    source: 'pwd',
    ...(expiresAt === undefined ? {} : { expiresAt }),
  };
}
