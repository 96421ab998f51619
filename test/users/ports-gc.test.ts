// A user port's registry of its open connections (src/users/ports.ts, closed with the port) keeps a closed one
// from nothing: with a long-lived Set there, every connection it ever held stayed reachable for V8's
// young-generation collections until the next full one (src/connlog/live-list.ts says how), and with it
// everything the connection references.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { keptInChild } from '../support/scavenge-kept.ts';

test("a user port's closed connection is not kept by the young generation's collections", { timeout: 120_000 }, async () => {
  // 8.7 KB kept per connection with the Set, 3.6-3.9 KB with the live list (4 MiB semi-spaces, the measuring child's
  // setting; the rest is node's own per-connection objects, client and server in one process).
  const { scavenges, keptPerOperation } = await keptInChild(join(import.meta.dirname, 'ports-gc-child.ts'), [
    join(import.meta.dirname, '../../src/users/ports.ts'),
  ]);
  assert.ok(scavenges >= 10, `enough young-generation collections to judge (${scavenges})`);
  assert.ok(keptPerOperation < 6000, `bytes kept per closed connection: ${keptPerOperation}`);
});
