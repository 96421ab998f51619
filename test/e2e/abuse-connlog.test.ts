// Issue 23 item 4 against the real daemon with a SQLite file: an unauthenticated flood (20,015 bad-credential
// requests wrote 20,015 records; the table held 56,941 rows with maxRecords 2,000 because trimming ran hourly;
// the file stayed at its largest size) must leave a bounded log. Real sockets: pipelined plain-HTTP requests
// without or with wrong credentials, SOCKS5 greetings with a wrong password and malformed ones, from several
// loopback source addresses; the rows are read from the file by a second SQLite connection while the flood runs.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { startGateway, type Gateway } from './harness.ts';

const basic = (user: string, pass: string) => `Proxy-Authorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}\r\n`;

/** One client connection from `source` that writes `requests` pipelined plain-HTTP requests and reads until closed. */
function pipelined(port: number, source: string, requests: number, auth: (i: number) => string, targetPort = 9): Promise<number> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, localAddress: source });
    let answers = 0;
    let text = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      text += d;
      let at: number;
      while ((at = text.indexOf('HTTP/1.1 ')) >= 0) {
        answers++;
        text = text.slice(at + 9);
        if (answers === requests) s.end();
      }
    });
    s.on('error', () => undefined);
    s.on('close', () => resolve(answers));
    let head = '';
    for (let i = 0; i < requests; i++) head += `GET http://127.0.0.1:${targetPort}/x${i} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth(i)}\r\n`;
    s.write(head);
  });
}

/** One SOCKS5 attempt from `source`: a username/password greeting with a wrong password, or a malformed greeting. */
function socks5(port: number, source: string, malformed: boolean): Promise<void> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, localAddress: source });
    s.on('error', () => undefined);
    s.on('close', () => resolve());
    s.on('data', () => undefined);
    if (malformed) s.end(Buffer.from([4, 1, 0, 80, 127, 0, 0, 1, 0]));
    else {
      const user = Buffer.from('nobody');
      const pass = Buffer.from('wrong');
      s.end(Buffer.concat([Buffer.from([5, 1, 2, 1, user.length]), user, Buffer.from([pass.length]), pass]));
    }
  });
}

/** The SQLite file and its WAL (where the latest writes are until a checkpoint). */
function onDisk(file: string): number {
  const size = (f: string) => (existsSync(f) ? statSync(f).size : 0);
  return size(file) + size(`${file}-wal`);
}

/** Runs `jobs` with at most `width` at once. */
async function parallel(jobs: (() => Promise<unknown>)[], width: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < jobs.length) await jobs[next++]!();
    }),
  );
}

describe('the connection log stays bounded under an unauthenticated flood', () => {
  const dirs: string[] = [];
  const gateways: Gateway[] = [];
  after(async () => {
    for (const g of gateways) await g.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const start = async (access: Record<string, unknown>) => {
    const dir = mkdtempSync(join(tmpdir(), 'rotor-abuse-connlog-'));
    dirs.push(dir);
    const file = join(dir, 'rotor.db');
    const gw = await startGateway({
      config: {
        store: { path: file },
        log: { access: { flushIntervalMs: 200, ...access } },
        // Back-off on, as by default, but answered at once: the flood goes as fast as the sockets do.
        proxy: { auth: { failureDelayMs: 0 } },
      },
    });
    gateways.push(gw);
    return { gw, file, rows: new Database(file, { readonly: true }).prepare('SELECT COUNT(*) AS n FROM connections') };
  };

  test('20,000 attempts leave at most 1,000 rows and the file under twice its size', { timeout: 300_000 }, async () => {
    const { gw, file, rows } = await start({});
    await gw.daemon.connections.recorder.flush();
    const before = onDisk(file);
    const sources = Array.from({ length: 8 }, (_, i) => `127.0.3.${i + 1}`);
    // Each wave from every source: 16 pipelined requests without credentials, 16 with a wrong password (within
    // proxy.pipelineDepth: all answered 407), three SOCKS5 attempts (a wrong password, two malformed greetings).
    let attempts = 0;
    while (attempts < 20_000) {
      const jobs: (() => Promise<unknown>)[] = [];
      for (const source of sources) {
        jobs.push(async () => {
          const answered = await pipelined(gw.ports.http, source, 16, () => '');
          attempts += answered;
        });
        jobs.push(async () => {
          const answered = await pipelined(gw.ports.http, source, 16, (i) => basic('nobody', `wrong-${i % 4}`));
          attempts += answered;
        });
        for (const malformed of [false, true, true]) jobs.push(async () => (await socks5(gw.ports.socks5, source, malformed), attempts++));
      }
      await parallel(jobs, 32);
    }
    await gw.daemon.connections.recorder.flush({ refusals: true });
    const held = Number((rows.get() as { n: number }).n);
    const after = onDisk(file);
    console.log(`${attempts} attempts: ${held} rows; file ${before} -> ${after} bytes`);
    assert.ok(held <= 1000, `${held} rows`);
    assert.ok(after < 2 * before, `file ${before} -> ${after} bytes`);
    const listed = await gw.admin<{ items: { count?: number; result: string }[] }>('/v1/connections?limit=1000');
    const counted = listed.body.items.reduce((n, r) => n + (r.count ?? 1), 0);
    assert.equal(counted, attempts, 'the records stand for every attempt');
  });

  test('rows never pass maxRecords at any moment while records flood in', { timeout: 300_000 }, async () => {
    const MAX = 300;
    const { gw, rows } = await start({ maxRecords: MAX });
    let most = 0;
    let done = false;
    const watch = (async () => {
      while (!done) {
        most = Math.max(most, Number((rows.get() as { n: number }).n));
        await new Promise((r) => setImmediate(r));
      }
    })();
    // Refused after authentication (port 25 is denied by default; the 403 closes the connection): one record
    // each, never counted together.
    const jobs: (() => Promise<unknown>)[] = [];
    let answered = 0;
    for (let i = 0; i < 1000; i++) {
      jobs.push(async () => {
        const n = await pipelined(gw.ports.http, '127.0.0.1', 1, () => basic('alice', 'alice-pass'), 25);
        answered += n;
      });
    }
    await parallel(jobs, 32);
    await gw.daemon.connections.recorder.flush();
    done = true;
    await watch;
    most = Math.max(most, Number((rows.get() as { n: number }).n));
    console.log(`${answered} refused requests of an authenticated user: at most ${most} rows seen (bound ${MAX})`);
    assert.equal(answered, 1000);
    assert.ok(most <= MAX, `${most} rows seen`);
    assert.equal(most, MAX, 'the flood filled the log');
  });

  test(
    'a flood from 2,000 addresses: one record per address and window, never more rows than maxRecords',
    { timeout: 300_000 },
    async () => {
      const MAX = 300;
      const { gw, rows } = await start({ maxRecords: MAX, refusalWindowMs: 100 });
      let most = 0;
      let done = false;
      const watch = (async () => {
        while (!done) {
          most = Math.max(most, Number((rows.get() as { n: number }).n));
          await new Promise((r) => setImmediate(r));
        }
      })();
      const jobs: (() => Promise<unknown>)[] = [];
      let answered = 0;
      for (let i = 0; i < 2000; i++) {
        const source = `127.4.${i >> 7}.${(i & 127) + 1}`;
        jobs.push(async () => {
          const n = await pipelined(gw.ports.http, source, 2, () => '');
          answered += n;
        });
      }
      await parallel(jobs, 32);
      await gw.daemon.connections.recorder.flush({ refusals: true });
      done = true;
      await watch;
      most = Math.max(most, Number((rows.get() as { n: number }).n));
      console.log(`${answered} attempts from 2,000 addresses: at most ${most} rows seen (bound ${MAX})`);
      assert.equal(answered, 4000);
      assert.ok(most <= MAX, `${most} rows seen`);
      assert.equal(most, MAX, 'the flood filled the log');
      const listed = await gw.admin<{ items: { client?: string; count?: number }[] }>('/v1/connections?limit=1000');
      assert.ok(
        listed.body.items.every((r) => r.client?.startsWith('127.4.')),
        'each record names its source',
      );
    },
  );
});
