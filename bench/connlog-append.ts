// What the SQLite connection log's append costs per record in a daemon's steady state: the table already holds
// `--prefill` records (a long-running daemon's log), and with `--max-records` at or below that every batch also
// removes as many of the oldest (the log at its bound, as it is after a day of traffic with the default
// 1,000,000). Records are shaped like an M2 tunnel's (one user, `ok`, loopback target and node), appended in
// batches of `--batch` with their rollups folded, as the recorder hands them over. CPU (user + system) per record
// is read around the appends only; with `--callgrind` the script expects to run under
// `valgrind --tool=callgrind --instr-atstart=no` and switches counting on for the appends only
// (callgrind_control), so the dump's total is the append's instructions (divide by --records).
//
//   node --import tsx bench/connlog-append.ts [--prefill 200000] [--records 50000] [--batch 500] [--max-records N]
//     [--rounds 3] [--callgrind]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { foldRollups } from '../src/store/connection-log-rollup.ts';
import type { ConnectionRecord } from '../src/store/connection-log-types.ts';
import { SqliteStore } from '../src/store/sqlite.ts';

const { values } = parseArgs({
  options: {
    prefill: { type: 'string', default: '200000' },
    records: { type: 'string', default: '50000' },
    batch: { type: 'string', default: '500' },
    'max-records': { type: 'string' },
    rounds: { type: 'string', default: '3' },
    callgrind: { type: 'boolean', default: false },
  },
});
const PREFILL = Number(values.prefill);
const RECORDS = Number(values.records);
const BATCH = Number(values.batch);

let seq = 0;
const prefix = `p${process.pid.toString(36)}`;
/** A batch of tunnel records as the recorder builds them (ids: a prefix and a base-36 counter). */
function batch(n: number, at: number): ConnectionRecord[] {
  const out: ConnectionRecord[] = [];
  for (let i = 0; i < n; i++) {
    const socks = (seq & 1) === 1;
    out.push({
      id: `${prefix}${(++seq).toString(36)}`,
      user: socks ? 'bs' : 'bh',
      session: null,
      listener: socks ? 'socks5' : 'http',
      target: '127.0.0.1:41234',
      client: '127.0.0.1',
      node: socks ? 'socks5://up@127.0.0.1:41001' : 'http://up@127.0.0.1:41002',
      bytesUp: 120,
      bytesDown: 2048,
      startedAt: at + i,
      durationMs: 1,
      result: 'ok',
      reason: 'closed',
      retries: 0,
      hedges: 0,
    });
  }
  return out;
}

const callgrind = (flag: string): void => {
  if (values.callgrind) execFileSync('callgrind_control', [flag, String(process.pid)], { stdio: 'ignore' });
};

async function round(): Promise<{ us: number; rows: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-connlog-append-'));
  const store = new SqliteStore(join(dir, 'rotor.db'));
  const max = values['max-records'] === undefined ? {} : { maxRecords: Number(values['max-records']) };
  const log = store.connectionLog(max);
  let at = Date.now() - 86_400_000;
  for (let i = 0; i < PREFILL; i += BATCH) {
    const b = batch(Math.min(BATCH, PREFILL - i), at);
    at += b.length;
    await log.append(b, foldRollups(b));
  }
  // The batches are built before the clock starts: only the store's work is counted.
  const batches: ConnectionRecord[][] = [];
  for (let i = 0; i < RECORDS; i += BATCH) {
    batches.push(batch(Math.min(BATCH, RECORDS - i), at));
    at += BATCH;
  }
  const usage = batches.map((b) => foldRollups(b));
  callgrind('--instr=on');
  const before = process.cpuUsage();
  for (let i = 0; i < batches.length; i++) await log.append(batches[i]!, usage[i]);
  const used = process.cpuUsage(before);
  callgrind('--instr=off');
  const rows = (await log.footprint()).records;
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  return { us: (used.user + used.system) / RECORDS, rows };
}

const per: number[] = [];
let rows = 0;
for (let r = 0; r < Number(values.rounds); r++) {
  const out = await round();
  per.push(out.us);
  rows = out.rows;
}
const sorted = [...per].sort((a, b) => a - b);
console.log(
  `append CPU per record, µs: median ${sorted[sorted.length >> 1]!.toFixed(2)} [${per.map((u) => u.toFixed(2)).join(' ')}]` +
    ` (prefill ${PREFILL}, ${RECORDS} records in batches of ${BATCH}, ${rows} rows held at the end)`,
);
