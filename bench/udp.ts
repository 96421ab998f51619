// `npm run bench:udp`: SOCKS5 UDP ASSOCIATE through Rotor against a direct UDP ASSOCIATE on the same sandbox
// upstream. The daemon runs in-process on the embedded sandbox (user bob, DrawByApi: the upstream's whitelist
// port admits 127.0.0.1 without credentials, which the direct run uses). A loopback UDP echo answers; each run
// sends ROTOR_BENCH_UDP_COUNT datagrams (default 20000) of 64 bytes, WINDOW in flight, and reports
// datagrams/s (round trips completed per second) and the round-trip p50/p99 in ms. Bounded: every run stops
// after 60 s whatever it got; lost datagrams are counted, not waited for.
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { parseUdpHeader, udpHeader } from '../src/wire/socks5-udp.ts';
import { startGateway } from '../test/e2e/harness.ts';

const COUNT = Number(process.env.ROTOR_BENCH_UDP_COUNT ?? 20_000);
const WINDOW = 32;
const RUN_LIMIT_MS = 60_000;

function reader(s: Socket): (n: number) => Promise<Buffer> {
  let buf = Buffer.alloc(0);
  let want: { n: number; resolve: (b: Buffer) => void } | undefined;
  s.on('data', (c: Buffer) => {
    buf = Buffer.concat([buf, c]);
    if (want && buf.length >= want.n) {
      const w = want;
      want = undefined;
      const out = buf.subarray(0, w.n);
      buf = buf.subarray(w.n);
      w.resolve(out);
    }
  });
  return (n) =>
    new Promise((resolve) => {
      if (buf.length >= n) {
        const out = buf.subarray(0, n);
        buf = buf.subarray(n);
        resolve(out);
      } else want = { n, resolve };
    });
}

/** UDP ASSOCIATE on host:port (RFC 1929 when `auth` is given); the relay address of the reply. */
async function associate(
  port: number,
  auth?: { user: string; pass: string },
): Promise<{ control: Socket; relay: { host: string; port: number } }> {
  const control = connect({ host: '127.0.0.1', port });
  await new Promise<void>((r, j) => control.once('connect', r).once('error', j));
  const read = reader(control);
  control.write(Buffer.from(auth ? [5, 1, 2] : [5, 1, 0]));
  await read(2);
  if (auth) {
    const u = Buffer.from(auth.user);
    const p = Buffer.from(auth.pass);
    control.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
    const st = await read(2);
    if (st[1] !== 0) throw new Error('auth refused');
  }
  control.write(Buffer.from([5, 3, 0, 1, 0, 0, 0, 0, 0, 0]));
  const head = await read(4);
  if (head[1] !== 0) throw new Error(`UDP ASSOCIATE refused: ${head[1]}`);
  const rest = await read(6);
  return { control, relay: { host: `${rest[0]}.${rest[1]}.${rest[2]}.${rest[3]}`, port: rest.readUInt16BE(4) } };
}

/** One client UDP socket per association: the relay serves only the address that sent first (RFC 1928 §7). */
async function clientSocket(): Promise<UdpSocket> {
  const udp = createSocket('udp4');
  await new Promise<void>((r) => udp.bind(0, '127.0.0.1', r));
  return udp;
}

async function run(name: string, udp: UdpSocket, relay: { host: string; port: number }, echoPort: number): Promise<void> {
  const header = udpHeader('127.0.0.1', echoPort)!;
  const sentAt = new Float64Array(COUNT);
  const rtts: number[] = [];
  let next = 0;
  let inFlight = 0;
  let lastAnswer = performance.now();
  const started = performance.now();
  await new Promise<void>((resolve) => {
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(limit);
      clearInterval(sweep);
      resolve();
    };
    const limit = setTimeout(() => finish(), RUN_LIMIT_MS);
    const send = (): void => {
      if (done) return;
      while (inFlight < WINDOW && next < COUNT) {
        const d = Buffer.alloc(header.length + 64);
        header.copy(d);
        d.writeUInt32BE(next, header.length);
        sentAt[next] = performance.now();
        udp.send(d, relay.port, relay.host);
        next++;
        inFlight++;
      }
    };
    // A lost datagram frees its window slot after 200 ms, so a loss never stalls the run.
    const sweep = setInterval(() => {
      inFlight = Math.min(inFlight, WINDOW - 1);
      if (next >= COUNT && performance.now() - lastAnswer > 200) finish();
      else send();
    }, 200);
    udp.removeAllListeners('message');
    udp.on('message', (msg) => {
      const h = parseUdpHeader(msg);
      if ('error' in h) return;
      const i = msg.readUInt32BE(h.length);
      lastAnswer = performance.now();
      rtts.push(lastAnswer - sentAt[i]!);
      inFlight--;
      if (rtts.length >= COUNT || (next >= COUNT && inFlight <= 0)) finish();
      else send();
    });
    send();
  });
  const seconds = (lastAnswer - started) / 1000;
  rtts.sort((a, b) => a - b);
  const q = (p: number): string => (rtts[Math.min(rtts.length - 1, Math.floor(p * rtts.length))] ?? NaN).toFixed(3);
  console.log(
    `${name.padEnd(8)} ${String(rtts.length).padStart(6)}/${COUNT} answered  ${(rtts.length / seconds).toFixed(0).padStart(7)} datagrams/s  rtt p50 ${q(0.5)} ms  p99 ${q(0.99)} ms`,
  );
}

const gw = await startGateway({ config: { log: { level: 'silent' } } });
const echo = createSocket('udp4');
echo.on('message', (msg, r) => echo.send(msg, r.port, r.address));
await new Promise<void>((r) => echo.bind(0, '127.0.0.1', r));
const echoPort = echo.address().port;
try {
  const bob = gw.daemon.users.get('bob');
  if (!bob) throw new Error('user bob is missing from config/default.yaml');
  const direct = await associate(await gw.daemon.sim!.upstreams!.whitelistPort(bob.mainAccount, bob.product));
  const viaRotor = await associate(gw.ports.socks5, { user: 'bob', pass: 'bob-pass' });
  console.log(`UDP ASSOCIATE, ${COUNT} datagrams of 64 bytes, ${WINDOW} in flight, to a loopback echo`);
  const [directUdp, rotorUdp] = [await clientSocket(), await clientSocket()];
  for (let round = 0; round < 2; round++) {
    await run('direct', directUdp, direct.relay, echoPort);
    await run('rotor', rotorUdp, viaRotor.relay, echoPort);
  }
  directUdp.close();
  rotorUdp.close();
  direct.control.destroy();
  viaRotor.control.destroy();
} finally {
  echo.close();
  await gw.close();
}
