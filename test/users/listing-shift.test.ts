// GET /v1/users at scale yields to the event loop every 1,024 names while a filtered or usage-ordered page is
// read; a user created or deleted meanwhile patches the name index's array in place. The walk goes on after the
// last name it looked at, not at its old position: no page lists a name twice, and no user falls between two
// pages (review12 #10: a creation listed u1022 twice, a deletion left u1023 out of every page). Real NameIndex and
// pageOf, the change landing in the walk's first yield, as a POST or DELETE /v1/users landing during the read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NameIndex, pageOf, type PageSource } from '../../src/users/listing.ts';

const names = Array.from({ length: 3000 }, (_, i) => `u${String(i).padStart(4, '0')}`);
const filtered: PageSource = { filtered: true, keep: () => true, usedBytes: () => 0 };
// Usage order with every user at the same usage: name order, the usage cursor `0:<name>`.
const byUsage: PageSource = { filtered: false, keep: () => true, usedBytes: () => 0 };

function index(): { idx: NameIndex; live: Set<string> } {
  const live = new Set(names);
  const idx = new NameIndex(() => live);
  idx.invalidate();
  idx.all();
  return { idx, live };
}

for (const sort of ['name', 'usage'] as const) {
  const source = sort === 'name' ? filtered : byUsage;
  const after = sort === 'name' ? 'u0500' : '0:u0500';
  const cursorOf = (name: string) => (sort === 'name' ? name : `0:${name}`);

  test(`${sort} order: a user created while a page is read is listed at most once, and no name twice`, async () => {
    const { idx, live } = index();
    setImmediate(() => {
      live.add('u0000a');
      idx.added('u0000a');
    });
    const page = await pageOf(idx, source, { limit: 1000, after, sort });
    const twice = page.names.filter((n, i) => page.names.indexOf(n) !== i);
    assert.deepEqual(twice, [], `one page after u0500 lists ${JSON.stringify(twice)} twice`);
    assert.deepEqual(page.names, names.slice(501, 1501));
  });

  test(`${sort} order: a user deleted while a page is read leaves no other user out of the pages`, async () => {
    const { idx, live } = index();
    setImmediate(() => {
      live.delete('u0001');
      idx.removed('u0001');
    });
    const first = await pageOf(idx, source, { limit: 1000, after, sort });
    assert.equal(first.next, cursorOf('u1500'));
    const second = await pageOf(idx, source, { limit: 1000, after: first.next!, sort });
    const seen = [...first.names, ...second.names];
    assert.deepEqual(seen, names.slice(501, 2501), 'pages 1 and 2 after u0500: u0501..u2500, each once');
  });
}
