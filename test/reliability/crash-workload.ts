// Crash safety (issue 9, item 4), shared by bench/crash.ts (20 cycles) and test/reliability/crash.test.ts (3):
// one sandbox in this process and `rotor start` as a child in remote mode pointed at it, so the platform's
// orders, charges and traffic survive the daemon's deaths. Each cycle runs orders (admin API) and traffic
// (HTTP CONNECT and SOCKS5 tunnels, bytes counted on the client side per user), SIGKILLs the daemon at a
// seeded random moment, reads what the store file kept, restarts the daemon on the same store and ports,
// and resubmits the orders whose answer was lost (same body, same merchant number: what a careful client
// does). At the end every order must be on the platform exactly once and final in Rotor, and no cycle may
// have lost more than one flush interval of counted traffic.
//
// How the counter loss is measured, per user and cycle:
//   client(t)   bytes the client sent and received inside its tunnels up to t (Rotor meters exactly these,
//               both directions; it counts a byte before the client sees it, never after)
//   relayed     client(kill) - client(cycle start)
//   lost on disk    relayed - (usedBytes in the store file read after the kill, before the restart
//                   - usedBytes of GET /v1/users at the cycle's start)
//   lost at restart relayed - (usedBytes of GET /v1/users after the restart - the same at the cycle's start)
//   window      client(kill) - client(kill - flushIntervalMs - timerSlackMs): what one flush interval (plus
//               the flush timer's lateness on a loaded machine) can hold
//   bound       window + byteSlack (tunnel bytes in kernel buffers and the request line); both losses <= bound
// and, from Rotor's side alone: the store file and the restarted daemon hold at least the largest usedBytes
// GET /v1/users reported at least flushIntervalMs + timerSlackMs before the kill ("counted at the previous flush").
// The users draw from the IP-count product (DYN-104-IP): it has no sub-account usage on the platform, so the
// limit sync cannot top a lost counter up with the platform's own count and hide a loss (with the traffic
// product Rotor adopts the platform's higher `useFlow` at each start, and the loss at restart is about zero).
import { connect, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PlatformClient } from '../../src/platform/client.ts';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { SqliteStore } from '../../src/store/index.ts';
import type { ConfigInput } from '../../src/config/index.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import { seeded } from './daemon.ts';
import { poll } from '../support/wait.ts';
import { restartablePort } from '../support/ports.ts';
import { orderSucceeded } from '../support/orders.ts';
import { spawnDaemon, startTarget, writeConfigFile, type BytesTarget, type ChildDaemon } from '../e2e/limits-harness.ts';

export interface CrashOptions {
  cycles: number;
  seed: number;
  /** accounts.flushIntervalMs of the daemon; default 500 */
  flushIntervalMs?: number;
  /** the kill falls uniformly in [min, max] ms after the daemon is ready; default [300, 2500] */
  killAfterMs?: [number, number];
  /**
   * From the second cycle on, the kill's clock starts when the cycle's traffic does (its first byte, awaited
   * up to 30 s), so a slow first draw on a loaded machine cannot leave every cycle without traffic. The first
   * cycle's kill may still beat its first draw. Default false (bench/crash.ts: the clock starts at the cycle).
   */
  clockFromTraffic?: boolean;
  /** orders submitted per cycle (one of them without a merchant number); default 3 */
  ordersPerCycle?: number;
  /** concurrent downloads per user; default 2 */
  downloadsPerUser?: number;
  /** bytes per second of each download (paced by the target); default 1,000,000 */
  rate?: number;
  /**
   * Platform latency during each cycle (cleared for the restarts), so kills find orders on the wire and
   * requests of the dead daemon land on the platform after it died; default 250 ms
   */
  platformLatencyMs?: number;
  /** flush-timer lateness allowed on a loaded machine; default 250 ms */
  timerSlackMs?: number;
  /** bytes allowed beyond the window; default 64 KiB */
  byteSlack?: number;
  /** progress lines */
  log?: (line: string) => void;
}

export interface UserCycle {
  user: string;
  /** client tunnel bytes from the cycle's start to the kill */
  relayed: number;
  clientAtKill: number;
  window: number;
  bound: number;
  storedAtKill: number;
  /** the kill came this long after the last flush that wrote this user's counter */
  lastFlushBeforeKillMs: number;
  usedAfterRestart: number;
  /** largest usedBytes Rotor reported at least one flush interval (+ slack) before the kill */
  flushedFloor: number;
  lostOnDisk: number;
  lostAtRestart: number;
}

export interface CycleReport {
  cycle: number;
  killAfterMs: number;
  ordersSent: number;
  /** sent but no 202 came back (connection died, or Rotor answered that the outcome is unknown) */
  answersLost: number;
  /** client bytes this cycle, all users */
  relayed: number;
  restartMs: number;
  users: UserCycle[];
}

export interface OrderCheck {
  merchantNo: string;
  chosen: boolean;
  platformOrders: number;
  charges: number;
  rotorStatus: number | null;
}

export interface CrashReport {
  seed: number;
  flushIntervalMs: number;
  timerSlackMs: number;
  byteSlack: number;
  cycles: CycleReport[];
  orders: OrderCheck[];
  /** of the lost answers: found by GET /v1/orders after the restart (Rotor's journal finished them) */
  recoveredByRotor: number;
  /** of the lost answers: unknown to Rotor after the restart, submitted again by the client */
  resubmitted: number;
  /** every platform order of the run (the setup's traffic purchase excluded) */
  platformOrders: number;
  failures: string[];
  elapsedMs: number;
}

const USERS = [
  { name: 'alice', password: 'alice-crash-pw', mainAccount: 'shop1' },
  { name: 'bob', password: 'bob-crash-pw', mainAccount: 'shop1' },
] as const;
const TOKEN = 'crash-admin-token';
const STATIC_PRODUCT = SIM_PRODUCTS.staticUsSocks; // inventory 500: enough for long runs
const DYNAMIC_PRODUCT = SIM_PRODUCTS.dynamicIpCount;

/**
 * A paced pause. Only for what this workload times on purpose: when an order is submitted and when the
 * daemon is killed (seeded moments of the cycle), the gap between a user's downloads and the 100 ms sampling
 * of Rotor's own view. Waiting for a state (an order final, answers back) goes through poll().
 */
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One download through a tunnel (SOCKS5 or HTTP CONNECT); `count` gets every tunneled byte both ways. */
function tunnelDownload(
  kind: 'socks5' | 'http',
  proxyPort: number,
  user: string,
  pass: string,
  targetPort: number,
  path: string,
  count: (n: number) => void,
  sockets: Set<Socket>,
): Promise<void> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port: proxyPort });
    sockets.add(s);
    const request = Buffer.from(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nConnection: close\r\n\r\n`);
    const tunnel = (rest: Buffer | null): void => {
      s.on('data', (d: Buffer) => count(d.length));
      s.write(request);
      count(request.length);
      if (rest && rest.length > 0) count(rest.length);
      s.resume();
    };
    s.on('error', () => {});
    s.on('close', () => {
      sockets.delete(s);
      resolve();
    });
    s.on('connect', () => {
      if (kind === 'socks5') {
        // Rotor's own SOCKS5 client (src/wire/socks5-client.ts): a refusal ends the download with nothing counted.
        socks5Connect(s, { host: '127.0.0.1', port: targetPort }, { username: user, password: pass }, (err, head) => {
          if (err) s.destroy();
          else tunnel(head);
        });
        return;
      }
      const auth = Buffer.from(`${user}:${pass}`).toString('base64');
      s.write(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
      let buf: Buffer = Buffer.alloc(0);
      const onHead = (d: Buffer): void => {
        buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        s.off('data', onHead);
        if (!/^HTTP\/1\.[01] 200/.test(buf.subarray(0, 12).toString('latin1'))) return void s.destroy();
        s.pause();
        tunnel(buf.subarray(end + 4));
      };
      s.on('data', onHead);
    });
  });
}

async function api(port: number, method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: kept as text for the failure message
  }
  return { status: res.status, body: parsed };
}

async function usersUsed(port: number): Promise<Record<string, number>> {
  const r = await api(port, 'GET', '/v1/users');
  if (r.status !== 200) throw new Error(`GET /v1/users: ${r.status}`);
  return Object.fromEntries((r.body as Array<{ name: string; usedBytes: number }>).map((u) => [u.name, u.usedBytes]));
}

async function storedUsage(path: string): Promise<Record<string, { used: number; at: number }>> {
  const store = new SqliteStore(path);
  try {
    return Object.fromEntries((await store.listUsage()).map((u) => [u.user, { used: u.usedBytes, at: u.updatedAt }]));
  } finally {
    await store.close();
  }
}

/** Buys IPs for the main account before the first start (remote mode credits no demo traffic). */
async function prepareSandbox(sim: Simulator): Promise<void> {
  const client = new PlatformClient({
    baseUrl: sim.baseUrl,
    appKey: sim.appKey,
    appSecret: sim.appSecret,
    retries: 2,
    backoff: { baseMs: 10, maxMs: 50 },
    timeoutMs: 5000,
  });
  try {
    await client.call('CreateUser', { appUsername: USERS[0].mainAccount, status: 1 });
    const appOrderNo = 'crashsetupflow';
    await client.call('InstanceOpen', {
      appOrderNo,
      params: [{ productNo: DYNAMIC_PRODUCT, appUsername: USERS[0].mainAccount, count: 100, cycleTimes: 1 }],
    });
    await orderSucceeded(client, { appOrderNo });
  } finally {
    client.close();
  }
}

function config(sim: Simulator, dir: string, flushIntervalMs: number, ports?: ChildDaemon['ports']): ConfigInput {
  return {
    platform: {
      mode: 'remote',
      baseUrl: sim.baseUrl,
      appKey: sim.appKey,
      appSecret: sim.appSecret,
      timeoutMs: 3000,
      retries: 3,
      backoff: { baseMs: 20, maxMs: 200 },
    },
    proxy: {
      http: { host: '127.0.0.1', port: ports?.http ?? 0 },
      socks5: { host: '127.0.0.1', port: ports?.socks5 ?? 0 },
      connectTimeoutMs: 3000,
      handshakeTimeoutMs: 3000,
    },
    admin: { host: '127.0.0.1', port: ports?.admin ?? 0, token: TOKEN },
    callback: { host: '127.0.0.1', port: ports?.callback ?? 0, path: '/callback' },
    store: { path: join(dir, 'rotor.db') },
    log: { level: 'info' },
    users: USERS.map((u) => ({ ...u, product: DYNAMIC_PRODUCT, draw: 'pwd' as const, sessTime: 5, limitBytes: -1 })),
    pool: { lowWater: 1, drawBatch: 2 },
    orders: { pollInitialMs: 200, pollMaxMs: 1000, sweepMs: 1000 },
    accounts: { balancePollMs: 60_000, limitSyncMs: 60_000, flushIntervalMs },
  } as ConfigInput;
}

interface Submitted {
  merchantNo: string | undefined;
  body: Record<string, unknown>;
  /** a 202 came back */
  answered: boolean;
}

export async function runCrashWorkload(options: CrashOptions): Promise<CrashReport> {
  const started = Date.now();
  const flushIntervalMs = options.flushIntervalMs ?? 500;
  const [killMin, killMax] = options.killAfterMs ?? [300, 2500];
  const ordersPerCycle = options.ordersPerCycle ?? 3;
  const downloadsPerUser = options.downloadsPerUser ?? 2;
  const rate = options.rate ?? 1_000_000;
  const timerSlackMs = options.timerSlackMs ?? 250;
  const platformLatencyMs = options.platformLatencyMs ?? 250;
  const byteSlack = options.byteSlack ?? 64 * 1024;
  const log = options.log ?? (() => {});
  const rand = seeded(options.seed);
  const failures: string[] = [];
  const fail = (msg: string): void => {
    failures.push(msg);
    log(`FAIL ${msg}`);
  };

  const dir = mkdtempSync(join(tmpdir(), 'rotor-crash-'));
  const storePath = join(dir, 'rotor.db');
  const configFile = join(dir, 'rotor.yaml');
  let sim: Simulator | undefined;
  let target: BytesTarget | undefined;
  let daemon: ChildDaemon | undefined;
  const cycles: CycleReport[] = [];
  const submitted: Submitted[] = [];
  let recoveredByRotor = 0;
  let resubmitted = 0;
  const orderChecks: OrderCheck[] = [];
  let platformOrders = 0;

  // Client-side tunnel bytes per user, cumulative; sampled so the window before a kill can be read back.
  const client: Record<string, number> = Object.fromEntries(USERS.map((u) => [u.name, 0]));
  const samples: Array<{ t: number; bytes: Record<string, number> }> = [];
  const clientAt = (t: number): Record<string, number> => {
    let best = samples[0]?.bytes ?? Object.fromEntries(USERS.map((u) => [u.name, 0]));
    for (const s of samples) {
      if (s.t > t) break;
      best = s.bytes;
    }
    return best;
  };

  const submit = async (port: number, s: Submitted): Promise<void> => {
    try {
      const r = await api(port, 'POST', '/v1/orders/open', s.body);
      if (r.status === 202) {
        s.answered = true;
        if (s.merchantNo === undefined) s.merchantNo = (r.body as { appOrderNo: string }).appOrderNo;
      } else if (r.status < 500) {
        fail(`order ${s.merchantNo ?? '(generated)'} refused: ${r.status} ${JSON.stringify(r.body)}`);
        s.answered = true;
      }
    } catch {
      // connection died with the daemon: the answer is lost
    }
  };

  try {
    sim = await startSimulator({ orderDelayMs: 1000, callbackBackoffMs: 200, seed: options.seed });
    target = await startTarget();
    await prepareSandbox(sim);
    // Same ports on every restart: clients and the sandbox's callbacks keep their addresses. Taken below the
    // ephemeral range, so no outgoing connection can be handed one between a kill and the restart.
    const picked = new Set<number>();
    while (picked.size < 4) picked.add(await restartablePort());
    const [http, socks5, admin, callback] = [...picked] as [number, number, number, number];
    const ports = { http, socks5, admin, callback };
    writeConfigFile(configFile, config(sim, dir, flushIntervalMs, ports));
    daemon = await spawnDaemon(configFile, join(dir, 'start-0.log'));
    sim.setCallbackUrl(`http://127.0.0.1:${ports.callback}/callback`);
    log(`seed ${options.seed}; store ${storePath}; ports ${JSON.stringify(ports)}`);

    for (let cycle = 1; cycle <= options.cycles; cycle++) {
      const killAfterMs = Math.round(killMin + rand() * (killMax - killMin));
      sim.faults.latency(platformLatencyMs);
      const cycleStart = Date.now();
      const clientAtStart = { ...client };
      const rotorAtStart = await usersUsed(ports.admin);
      let alive = true;
      const sockets = new Set<Socket>();

      // Traffic: each user keeps `downloadsPerUser` downloads running, alternating SOCKS5 and HTTP CONNECT.
      const loops: Promise<void>[] = [];
      for (const u of USERS) {
        for (let k = 0; k < downloadsPerUser; k++) {
          loops.push(
            (async () => {
              let n = k;
              while (alive) {
                const kind = n++ % 2 === 0 ? 'socks5' : 'http';
                const size = Math.round(rate * (0.5 + rand()));
                await tunnelDownload(
                  kind,
                  kind === 'socks5' ? ports.socks5 : ports.http,
                  u.name,
                  u.password,
                  target!.port,
                  `/bytes/${size}?rate=${rate}`,
                  (b) => {
                    client[u.name] = client[u.name]! + b;
                  },
                  sockets,
                );
                if (alive) await sleep(5); // pacing: the next download of this user
              }
            })(),
          );
        }
      }
      const sampler = setInterval(() => samples.push({ t: Date.now(), bytes: { ...client } }), 20);
      samples.push({ t: Date.now(), bytes: { ...client } });

      // Rotor's own view, polled: the floor that must survive the kill.
      const seen: Array<{ t: number; used: Record<string, number> }> = [];
      const poller = (async () => {
        while (alive) {
          try {
            const used = await usersUsed(ports.admin);
            if (alive) seen.push({ t: Date.now(), used });
          } catch {
            // the daemon is gone
          }
          await sleep(100); // pacing: Rotor's view is sampled every 100 ms (the floor the kill must not lose)
        }
      })();

      // The kill's clock (see clockFromTraffic), which the orders' moments follow too.
      let clockStart = cycleStart;
      if (options.clockFromTraffic && cycle > 1) {
        const flowing = (): boolean => USERS.some((u) => client[u.name]! > clientAtStart[u.name]!);
        const waitUntil = Date.now() + 30_000;
        while (!flowing() && Date.now() < waitUntil) await sleep(10); // polls the clients' own counters
        if (!flowing()) fail(`cycle ${cycle}: no traffic within 30 s of the cycle's start`);
        clockStart = Date.now();
      }
      // Orders at random moments of the cycle; some land after the kill and find no daemon.
      const orderRuns: Promise<void>[] = [];
      let answersLostBefore = submitted.filter((s) => !s.answered).length;
      for (let j = 0; j < ordersPerCycle; j++) {
        const chosen = j > 0;
        const merchantNo = chosen ? `K${options.seed.toString(36)}c${cycle}n${j}` : undefined;
        const body: Record<string, unknown> = {
          productNo: STATIC_PRODUCT,
          count: 1,
          cycleTimes: 1,
          ...(merchantNo ? { appOrderNo: merchantNo } : {}),
        };
        const s: Submitted = { merchantNo, body, answered: false };
        submitted.push(s);
        const at = rand() * killAfterMs * 1.05;
        orderRuns.push(sleep(Math.max(0, clockStart + at - Date.now())).then(() => submit(ports.admin, s))); // pacing: a seeded moment of the cycle
      }

      // Under test: the kill falls at a seeded random moment, whatever is in flight then.
      await sleep(Math.max(0, killAfterMs - (Date.now() - clockStart)));
      const tKill = Date.now();
      const clientAtKill = { ...client };
      daemon.signal('SIGKILL');
      const exit = await daemon.exited;
      alive = false;
      sim.faults.latency(0);
      clearInterval(sampler);
      if (exit.signal !== 'SIGKILL') fail(`cycle ${cycle}: the daemon exited with ${JSON.stringify(exit)}, not by SIGKILL`);
      for (const s of sockets) s.destroy();
      await Promise.all([...loops, poller, ...orderRuns]);
      const stored = await storedUsage(storePath);

      const restartAt = Date.now();
      daemon = await spawnDaemon(configFile, join(dir, `start-${cycle}.log`));
      const restartMs = Date.now() - restartAt;
      const after = await usersUsed(ports.admin);

      const windowStart = clientAt(tKill - flushIntervalMs - timerSlackMs);
      const users: UserCycle[] = USERS.map(({ name }) => {
        const floorSeen = seen.filter((x) => x.t <= tKill - flushIntervalMs - timerSlackMs);
        const flushedFloor = floorSeen.length ? Math.max(...floorSeen.map((x) => x.used[name] ?? 0)) : 0;
        const window = clientAtKill[name]! - windowStart[name]!;
        const u: UserCycle = {
          user: name,
          clientAtKill: clientAtKill[name]!,
          window,
          bound: window + byteSlack,
          storedAtKill: stored[name]?.used ?? 0,
          lastFlushBeforeKillMs: tKill - (stored[name]?.at ?? 0),
          usedAfterRestart: after[name] ?? 0,
          flushedFloor,
          relayed: clientAtKill[name]! - clientAtStart[name]!,
          lostOnDisk: clientAtKill[name]! - clientAtStart[name]! - ((stored[name]?.used ?? 0) - (rotorAtStart[name] ?? 0)),
          lostAtRestart: clientAtKill[name]! - clientAtStart[name]! - ((after[name] ?? 0) - (rotorAtStart[name] ?? 0)),
        };
        if (u.lostOnDisk > u.bound)
          fail(`cycle ${cycle} ${name}: ${u.lostOnDisk} bytes relayed before the kill are not in the store file (bound ${u.bound})`);
        if (u.lostAtRestart > u.bound)
          fail(`cycle ${cycle} ${name}: usedBytes after the restart is ${u.lostAtRestart} below the client's count (bound ${u.bound})`);
        if (u.storedAtKill < flushedFloor)
          fail(`cycle ${cycle} ${name}: store file holds ${u.storedAtKill} < ${flushedFloor} reported one flush interval before the kill`);
        if (u.usedAfterRestart < flushedFloor)
          fail(
            `cycle ${cycle} ${name}: usedBytes after restart ${u.usedAfterRestart} < ${flushedFloor} reported one flush interval before the kill`,
          );
        return u;
      });

      // Lost answers: does Rotor know the number after the restart? If not, the client submits it again.
      const pending = submitted.filter((s) => !s.answered);
      const lostThisCycle = pending.length - answersLostBefore;
      answersLostBefore = pending.length;
      for (const s of pending) {
        if (s.merchantNo === undefined) {
          // No number to ask about or to resubmit with: the final check finds it on the platform if it got there.
          s.answered = true;
          continue;
        }
        const known = await api(ports.admin, 'GET', `/v1/orders/${s.merchantNo}`).catch(() => ({ status: 0, body: undefined }));
        if (known.status === 200) {
          recoveredByRotor += 1;
          s.answered = true;
          continue;
        }
        resubmitted += 1;
        await submit(ports.admin, s);
      }

      const relayed = USERS.reduce((sum, u) => sum + clientAtKill[u.name]! - clientAtStart[u.name]!, 0);
      const report: CycleReport = { cycle, killAfterMs, ordersSent: ordersPerCycle, answersLost: lostThisCycle, relayed, restartMs, users };
      cycles.push(report);
      log(
        `cycle ${cycle}: kill after ${killAfterMs} ms, relayed ${kb(relayed)} KB, answers lost ${lostThisCycle}; ` +
          users
            .map(
              (u) =>
                `${u.user} lost on disk ${kb(u.lostOnDisk)} / at restart ${kb(u.lostAtRestart)} / bound ${kb(u.bound)} KB (last flush ${u.lastFlushBeforeKillMs} ms before the kill)`,
            )
            .join('; ') +
          `; restart ${restartMs} ms`,
      );
    }

    // Settle: every unanswered order submitted again until answered, then every order final.
    await poll(
      async () => {
        for (const s of submitted.filter((x) => !x.answered)) await submit(ports.admin, s);
        return submitted.every((s) => s.answered);
      },
      { what: 'every order answered', timeoutMs: 10_000, everyMs: 50 },
    ).catch(() => undefined);
    for (const s of submitted.filter((x) => !x.answered)) fail(`order ${s.merchantNo} never answered 202`);

    const simNow = sim;
    const ours = (): Array<{ appOrderNo: string }> => simNow.inspect.orders().filter((o) => o.appOrderNo !== 'crashsetupflow');
    const numbers = new Map<string, boolean>();
    for (const s of submitted) if (s.merchantNo) numbers.set(s.merchantNo, s.body.appOrderNo !== undefined);
    // Orders whose number Rotor generated and whose answer was lost: known only from the platform's side.
    for (const o of ours()) if (!numbers.has(o.appOrderNo)) numbers.set(o.appOrderNo, false);
    const deadline = Date.now() + 30_000;
    for (const [no, chosen] of numbers) {
      let status: number | null = null;
      await poll(
        async () => {
          const r = await api(ports.admin, 'GET', `/v1/orders/${no}`).catch(() => ({ status: 0, body: undefined }));
          status = r.status === 200 ? (r.body as { status: number }).status : null;
          return status !== null && status >= 3;
        },
        { what: `order ${no} final`, timeoutMs: Math.max(0, deadline - Date.now()), everyMs: 50 },
      ).catch(() => undefined);
      const check: OrderCheck = {
        merchantNo: no,
        chosen,
        platformOrders: simNow.inspect.orders().filter((o) => o.appOrderNo === no).length,
        charges: simNow.inspect.charges(no).length,
        rotorStatus: status,
      };
      orderChecks.push(check);
      if (check.platformOrders !== 1) fail(`order ${no}: ${check.platformOrders} platform orders`);
      if (check.charges !== 1) fail(`order ${no}: ${check.charges} charges`);
      if (status === null || status < 3) fail(`order ${no}: Rotor shows status ${status}, not final`);
    }
    platformOrders = ours().length;
    const listed = await api(ports.admin, 'GET', '/v1/orders?limit=1000');
    const listedOrders = listed.body as Array<{ appOrderNo: string; status: number }>;
    const listedNos = listedOrders.map((o) => o.appOrderNo);
    if (new Set(listedNos).size !== listedNos.length) fail('GET /v1/orders lists a merchant number twice');
    for (const no of numbers.keys()) if (!listedNos.includes(no)) fail(`GET /v1/orders does not list ${no}`);
    // Nothing Rotor holds is missing from the platform or left open.
    for (const o of listedOrders) {
      if (!numbers.has(o.appOrderNo)) fail(`Rotor lists ${o.appOrderNo}, which the platform never received`);
      if (!(o.status >= 3)) fail(`Rotor lists ${o.appOrderNo} with status ${o.status}, not final`);
    }
  } finally {
    if (daemon) await daemon.stop(5000).catch(() => {});
    await target?.close();
    await sim?.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    seed: options.seed,
    flushIntervalMs,
    timerSlackMs,
    byteSlack,
    cycles,
    orders: orderChecks,
    recoveredByRotor,
    resubmitted,
    platformOrders,
    failures,
    elapsedMs: Date.now() - started,
  };
}

const kb = (n: number): string => (n / 1024).toFixed(1);

/** The per-cycle table (markdown) and a summary line. */
export function crashTable(r: CrashReport): string {
  const lines = [
    '| cycle | kill after | orders sent / answer lost | relayed in cycle | alice: lost on disk / at restart / bound | bob: lost on disk / at restart / bound | restart |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const c of r.cycles) {
    const u = (name: string): string => {
      const x = c.users.find((y) => y.user === name)!;
      return `${kb(x.lostOnDisk)} / ${kb(x.lostAtRestart)} / ${kb(x.bound)} KB`;
    };
    lines.push(
      `| ${c.cycle} | ${c.killAfterMs} ms | ${c.ordersSent} / ${c.answersLost} | ${kb(c.relayed)} KB | ${u('alice')} | ${u('bob')} | ${c.restartMs} ms |`,
    );
  }
  return lines.join('\n');
}

export function crashSummary(r: CrashReport): string {
  const all = r.cycles.flatMap((c) => c.users);
  const worst = all.reduce((m, u) => Math.max(m, u.lostOnDisk), -Infinity);
  const worstRatio = all.reduce((m, u) => Math.max(m, u.window > 0 ? u.lostOnDisk / u.window : 0), 0);
  const chosen = r.orders.filter((o) => o.chosen).length;
  const once = r.orders.filter((o) => o.platformOrders === 1 && o.charges === 1 && (o.rotorStatus ?? 0) >= 3).length;
  return [
    `seed ${r.seed}, ${r.cycles.length} SIGKILL cycles in ${(r.elapsedMs / 1000).toFixed(0)} s; flush interval ${r.flushIntervalMs} ms (window = client bytes in the last ${r.flushIntervalMs + r.timerSlackMs} ms before the kill; bound = window + ${kb(r.byteSlack)} KB)`,
    `orders: ${r.orders.length} merchant numbers (${chosen} chosen by the client, ${r.orders.length - chosen} generated by Rotor), ${once} complete exactly once (one platform order, one charge, final in Rotor); platform orders in all: ${r.platformOrders}`,
    `answers lost in a kill: ${r.cycles.reduce((s, c) => s + c.answersLost, 0)}; found by Rotor after the restart: ${r.recoveredByRotor}; submitted again by the client: ${r.resubmitted}`,
    `counters: worst loss on disk ${kb(worst)} KB (${(worstRatio * 100).toFixed(0)}% of its window); store file and restarted daemon >= the usedBytes Rotor reported ${r.flushIntervalMs + r.timerSlackMs} ms before the kill: ${all.filter((u) => u.storedAtKill >= u.flushedFloor && u.usedAfterRestart >= u.flushedFloor).length} of ${all.length} user-cycles; restart p50 ${median(r.cycles.map((c) => c.restartMs))} ms`,
    r.failures.length ? `FAILURES (${r.failures.length}):\n${r.failures.join('\n')}` : 'all checks passed',
  ].join('\n');
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : 0;
}
