// A listener's registry of open connections (src/proxy/connections.ts) keeps a closed one from nothing: with a
// long-lived Set there, every connection it ever held stayed reachable for V8's young-generation collections
// until the next full one (src/connlog/live-list.ts says how), and with it everything the connection references.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { keptInChild } from '../support/scavenge-kept.ts';

test("a closed connection is not kept by the young generation's collections (about 4 KB each held by its socket)", async () => {
  // 9.8 KB kept per connection with the Set, 0.5 KB with the live list (4 MiB semi-spaces, the measuring child's setting).
  const { scavenges, keptPerOperation } = await keptInChild(join(import.meta.dirname, 'connections-gc-child.ts'), [
    join(import.meta.dirname, '../../src/proxy/connections.ts'),
  ]);
  assert.ok(scavenges >= 10, `enough young-generation collections to judge (${scavenges})`);
  assert.ok(keptPerOperation < 2000, `bytes kept per closed connection: ${keptPerOperation}`);
});
