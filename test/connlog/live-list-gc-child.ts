// Child of live-list.test.ts (test/support/scavenge-kept.ts): connections opened and ended through a long-lived
// ConnectionLog, 50 open at a time, each holding about 4 KB through its record (its byte counters, as a
// forwarded request's exchange is). A connection that ended before a young-generation collection should cost it
// nothing.
import { pathToFileURL } from 'node:url';
import { keptPerOperation } from '../support/scavenge-kept.ts';

const { ConnectionLog } = (await import(pathToFileURL(process.argv[2]!).href)) as typeof import('../../src/connlog/recorder.ts');

const log = new ConnectionLog();
const open: ReturnType<typeof log.open>[] = [];
const run = (n: number): void => {
  for (let i = 0; i < n; i++) {
    const conn = log.open('http', '127.0.0.1');
    conn.bytes = Object.assign({ up: 0, down: 0 }, { held: new Array<number>(500).fill(i) });
    open.push(conn);
    if (open.length > 50) open.shift()!.end({ result: 'ok', reason: 'closed' });
  }
};
const OPS = 40_000;
await keptPerOperation(
  () => run(2000),
  OPS,
  () => run(OPS),
);
