// What one connection record costs the daemon's main thread, apart from any proxying: the recorder (a context
// opened, filled and ended as a plain-HTTP request's is, queued, batched) with no sink, with a sink that keeps
// nothing, and with the SQLite store (the insert into the table and its indexes, the commit, the rollups), the
// modes interleaved over rounds, each in a fresh SQLite file. CPU (user + system) per record is read from
// process.cpuUsage around the whole run, the final flush included. With --profile DIR a V8 CPU profile of each
// store run goes to DIR (summarise with bench/profile.ts).
//
//   node --import tsx bench/connlog-record.ts [--records 100000] [--rounds 3] [--batch 500] [--profile DIR]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ConnectionLog } from '../src/connlog/recorder.ts';
import type { RecordSink } from '../src/connlog/types.ts';
import { SqliteStore } from '../src/store/sqlite.ts';

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '3' },
    batch: { type: 'string', default: '500' },
    profile: { type: 'string' },
  },
});
const RECORDS = Number(values.records);
const BATCH = Number(values.batch);
type Mode = 'no sink' | 'empty sink' | 'store';
const MODES: Mode[] = ['no sink', 'empty sink', 'store'];
const keepNothing: RecordSink = { write: async () => undefined, close: async () => undefined };
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function run(mode: Mode, profileTo: string | undefined): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-connlog-record-'));
  const store = new SqliteStore(join(dir, 'rotor.db'));
  const log = new ConnectionLog({
    batchSize: BATCH,
    ...(mode === 'store' ? { store: store.connectionLog() } : {}),
    ...(mode === 'empty sink' ? { sinks: [keepNothing] } : {}),
  });
  const session = profileTo ? new Session() : undefined;
  if (session) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
  }
  const before = process.cpuUsage();
  for (let i = 0; i < RECORDS; i++) {
    const ctx = log.open('http', '127.0.0.1');
    ctx.user = 'bench';
    ctx.target = `site-${i % 50}.example:80`;
    ctx.node = 'socks5://sub@127.0.0.1:9000';
    ctx.bytes = { up: 120, down: 2048 };
    ctx.end({ result: 'ok', reason: 'closed', up: 120, down: 2048 });
    // A turn of the event loop now and then, as requests arrive: full batches are written from setImmediate.
    if (i % 50 === 49) await turn();
  }
  await log.flush();
  const used = process.cpuUsage(before);
  if (session && profileTo) {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(profileTo, JSON.stringify(profile));
    session.disconnect();
  }
  await log.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  return (used.user + used.system) / RECORDS;
}

const results = new Map<Mode, number[]>(MODES.map((m) => [m, []]));
for (let round = 0; round < Number(values.rounds); round++) {
  // The order rotates every round so that the machine's load falls on every mode alike.
  const order = MODES.map((_, k) => MODES[(k + round) % MODES.length]!);
  for (const mode of order) {
    const profileTo = values.profile && mode === 'store' ? join(values.profile, `store-${round}.cpuprofile`) : undefined;
    results.get(mode)!.push(await run(mode, profileTo));
  }
}
const median = (a: number[]): number => [...a].sort((x, y) => x - y)[a.length >> 1]!;
console.log(`CPU per record, µs (median of ${values.rounds} rounds of ${RECORDS} records, batches of ${BATCH}) [per round]`);
for (const [mode, us] of results)
  console.log(`  ${mode.padEnd(11)} ${median(us).toFixed(2).padStart(6)}   [${us.map((u) => u.toFixed(2)).join(' ')}]`);
