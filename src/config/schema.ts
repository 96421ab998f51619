// The configuration of docs/reference.md ("Configuration") as one zod schema with its defaults, plus the keys
// Rotor adds (documented in config/default.yaml). Unknown keys are errors, so a typo never silently falls
// back to a default.
import { isIP } from 'node:net';
import { z } from 'zod';
import { SESS_TIME_MAX, SESS_TIME_MIN } from '../platform/operations.ts';
import { isTimeZone } from '../accounting/period.ts';
import { productsSchema, quotaSchema } from '../users/record.ts';
import { listenSchema, rulesSchema } from '../users/schemas.ts';
import { requestRulesSchema } from '../users/request-rules-schema.ts';

const port = z.number().int().min(0).max(65_535);
/** A fixed offset from UTC, `±HH:MM` up to ±14:00 (platform.timeZone). */
const FIXED_OFFSET = /^[+-](0\d|1[0-3]):?[0-5]\d$|^[+-]14:?00$/;
const host = z.string().min(1);
const millis = z.number().int().min(1);

const listener = (defaultPort: number) => z.strictObject({ host: host.default('127.0.0.1'), port: port.default(defaultPort) }).prefault({});

export const SECRET_LENGTHS = [16, 24, 32] as const;

/** True for addresses only this machine can reach: 127.0.0.0/8, ::1, localhost. */
export function isLoopbackHost(h: string): boolean {
  const bare = h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
  if (bare === 'localhost') return true;
  if (isIP(bare) === 4) return bare.startsWith('127.');
  if (isIP(bare) === 6) return bare === '::1' || bare === '0:0:0:0:0:0:0:1' || /^::ffff:127\./i.test(bare);
  return false;
}

const platform = z
  .strictObject({
    mode: z.enum(['embedded', 'remote']).default('embedded'),
    baseUrl: z.string().default(''),
    appKey: z.string().default(''),
    appSecret: z.string().default(''),
    /** Envelope `version`: the seed states both `v2` and `2.0`. */
    version: z.enum(['v2', '2.0']).default('v2'),
    /** Envelope `encrypt`; live clients send `aes` or `AES`. */
    encrypt: z.string().min(1).default('aes'),
    timeoutMs: millis.default(10_000),
    retries: z.number().int().min(0).max(10).default(3),
    /**
     * The zone the platform reads the flow-use log's `YYYY-MM-DD HH:MM:SS` times in (the seed names none): an IANA
     * zone (Asia/Shanghai for a platform on China time) or a fixed offset (+08:00).
     */
    timeZone: z
      .string()
      .refine(
        (zone) => FIXED_OFFSET.test(zone) || isTimeZone(zone),
        'must be an IANA time zone (e.g. UTC, Asia/Shanghai) or an offset like +08:00',
      )
      .default('UTC'),
    backoff: z.strictObject({ baseMs: z.number().int().min(0).default(200), maxMs: z.number().int().min(0).default(5_000) }).prefault({}),
    /** Embedded mode only: settings of the in-process sandbox. */
    sandbox: z
      .strictObject({
        /** Per productNo, proxy strings DrawByPwd hands out instead of the sandbox's gateways (the bench's upstreams). */
        drawnLines: z.record(z.string().min(1), z.array(z.string().min(1)).min(1)).default({}),
        /** Products whose DrawByPwd answers like a backconnect gateway: the same line every draw, exits rotating per connection. */
        backconnect: z.array(z.string().min(1)).max(100).default([]),
        /** Every platform call to the sandbox waits this long first (a far or slow platform). */
        latencyMs: z.number().int().min(0).max(60_000).default(0),
      })
      .prefault({}),
  })
  .prefault({})
  .superRefine((p, ctx) => {
    const secretBytes = Buffer.byteLength(p.appSecret, 'utf8');
    if (p.appSecret !== '' && !(SECRET_LENGTHS as readonly number[]).includes(secretBytes)) {
      ctx.addIssue({ code: 'custom', path: ['appSecret'], message: `must be 16, 24 or 32 bytes (got ${secretBytes})` });
    }
    if (p.baseUrl !== '') {
      let ok = false;
      try {
        const u = new URL(p.baseUrl);
        ok = u.protocol === 'http:' || u.protocol === 'https:';
      } catch {
        ok = false;
      }
      if (!ok) ctx.addIssue({ code: 'custom', path: ['baseUrl'], message: 'must be an http:// or https:// URL' });
    }
    if (p.mode === 'remote') {
      // Embedded mode takes key and secret from the in-process simulator; remote mode cannot.
      if (p.baseUrl === '') ctx.addIssue({ code: 'custom', path: ['baseUrl'], message: 'required when platform.mode is remote' });
      if (p.appKey === '') ctx.addIssue({ code: 'custom', path: ['appKey'], message: 'required when platform.mode is remote' });
      if (p.appSecret === '')
        ctx.addIssue({ code: 'custom', path: ['appSecret'], message: 'required when platform.mode is remote (16, 24 or 32 bytes)' });
    }
  });

/** Proxy logins (src/proxy/auth-guard.ts AuthSettings, src/admission/password.ts hashing bounds). */
const proxyAuth = z
  .strictObject({
    /**
     * (user name, password) pairs answered lately, each answered again with one look-up; refused pairs: as many,
     * by digest. A pair pushed out still needs no check: each user's verified password is kept per user
     * (src/proxy/auth-check.ts), bounded by the users, not by this.
     */
    cacheSize: z.number().int().min(1).max(10_000_000).default(10_000),
    /** scrypt checks running at once, each on a thread of its own (src/admission/hash-threads.ts). */
    maxConcurrentHashes: z.number().int().min(1).max(64).default(2),
    /** Linux nice value of those threads: how far below the event loop password hashes run (0 = as high). */
    hashNice: z.number().int().min(0).max(19).default(10),
    /** Login checks waiting for a hash at most; beyond, refused at once ('busy'). */
    maxQueuedHashes: z.number().int().min(0).max(100_000).default(64),
    /** Checks waiting from one address at most; beyond, refused at once ('busy'). */
    maxPendingPerSource: z.number().int().min(1).max(100_000).default(8),
    /** A failed login is answered no sooner than this after it arrived. */
    failureDelayMs: z.number().int().min(0).max(60_000).default(250),
    /** Failures from one address (IPv6: its /64) within failureWindowMs that block it for blockMs; 0 = never. */
    sourceFailures: z.number().int().min(0).default(20),
    /** Failures for one user name within failureWindowMs that block it for blockMs; 0 = never. */
    userFailures: z.number().int().min(0).default(50),
    failureWindowMs: millis.default(60_000),
    blockMs: z.number().int().min(0).default(60_000),
    /** Addresses and user names whose failures are tracked at most (least recently seen dropped first). */
    trackedMax: z.number().int().min(1).max(10_000_000).default(10_000),
    /** One log line per address per this interval, never one per attempt. */
    logIntervalMs: millis.default(60_000),
  })
  .prefault({});

const proxy = z
  .strictObject({
    http: listener(8080),
    socks5: listener(1080),
    /** Bound on dialing an upstream. */
    connectTimeoutMs: millis.default(10_000),
    /** Bound on a client's SOCKS5 handshake / HTTP request head. */
    handshakeTimeoutMs: millis.default(10_000),
    /** A relayed connection with no bytes either way for this long is closed; 0 = never. */
    idleTimeoutMs: z.number().int().min(0).default(300_000),
    /** Other upstreams tried after a failed dial, before the client is answered with an error. */
    retries: z.number().int().min(0).max(20).default(3),
    /** A node not through its handshake after this long gets the next node dialed in parallel; 0 = adaptive. */
    hedgeAfterMs: z.number().int().min(0).max(60_000).default(0),
    /** Bound on an upstream's answer to the tunnel request, after the TCP connect; absent = connectTimeoutMs. */
    upstreamHandshakeTimeoutMs: millis.optional(),
    /** Destination rules every user is held to (src/users/rules.ts); the user's own `rules` apply as well. */
    rules: rulesSchema.prefault({ denyPorts: [25] }),
    /** Request rules every user is held to, after the user's own (src/proxy/request-rules.ts); none by default. */
    requestRules: requestRulesSchema.default([]),
    /**
     * On SIGTERM/SIGINT, open connections get this long to finish; those still open are then cut and recorded as
     * `shutdown`. 5 s: a stop's grace of 10 s (docker stop's default) leaves the rest for the last writes.
     */
    drainMs: z.number().int().min(0).max(600_000).default(5_000),
    // ── TLS to the proxy (src/proxy/https-listener.ts) ──
    /** The HTTP proxy over TLS ("HTTPS proxy"); absent = off. `cert`/`key`: PEM files, read again on SIGHUP. */
    https: z
      .strictObject({ host: host.default('127.0.0.1'), port: port.default(8443), cert: z.string().min(1), key: z.string().min(1) })
      .optional(),
    // ── SOCKS5 UDP ASSOCIATE (src/proxy/udp-associate.ts) ──
    /** `enabled` false answers UDP ASSOCIATE 0x07; bounds per user and per association. */
    udp: z
      .strictObject({
        enabled: z.boolean().default(true),
        maxAssociationsPerUser: z.number().int().min(1).max(10_000).default(16),
        maxPendingDatagrams: z.number().int().min(1).max(100_000).default(256),
      })
      .prefault({}),
    // ── plain-HTTP pipelining (src/proxy/http-lane.ts) ──
    /**
     * Plain-HTTP requests a client connection may have waiting behind the one in flight (HTTP/1.1
     * pipelining: one request at a time goes upstream); past it the connection is answered 503 and closed.
     */
    pipelineDepth: z.number().int().min(0).max(1000).default(16),
    /**
     * Bytes the kernel may hold not yet sent to a client (TCP_NOTSENT_LOWAT on Linux and macOS): what a client
     * that stops reading makes Rotor read from the upstream, beyond Rotor's own buffers; 0 = the kernel's own
     * (up to net.ipv4.tcp_wmem's maximum, 4 MiB by default). A tunnel's client that keeps taking a bulk
     * download is allowed 1 MiB while it does (src/proxy/unsent-limit.ts BULK_UNSENT).
     */
    clientUnsentBytes: z
      .number()
      .int()
      .min(0)
      .max(64 * 1024 * 1024)
      .default(128 * 1024),
    // ── abuse bounds (README "Security") ──
    /** Sticky sessions one user holds at most; a new session id past it is refused (403 / SOCKS5 0x02). */
    maxSessionsPerUser: z.number().int().min(1).max(1_000_000).default(1000),
    /** Proxy logins: verified-pair cache, password checks off the event loop, back-off (src/proxy/auth-*.ts). */
    auth: proxyAuth,
  })
  .prefault({});

const admin = z
  .strictObject({
    host: host.default('127.0.0.1'),
    port: port.default(9090),
    token: z.string().default(''),
    /** Host names (besides IP literals, loopback names and admin.host) the admin port answers; '*' = any. */
    allowedHosts: z.array(z.string().min(1)).default([]),
    /** Web origins (besides the admin port itself) whose pages may call the admin port; '*' = any. */
    allowedOrigins: z.array(z.string().min(1)).default([]),
    /**
     * When /metrics and /docs need the token (src/admin/server.ts): 'auto' = once the port is published under a
     * name, for a request naming a public host, or one carrying a forwarding header; 'always' = every request.
     */
    metricsToken: z.enum(['auto', 'always']).default('auto'),
  })
  .prefault({})
  .superRefine((a, ctx) => {
    if (a.token === '' && !isLoopbackHost(a.host)) {
      ctx.addIssue({ code: 'custom', path: ['token'], message: `required when admin.host (${a.host}) is not a loopback address` });
    }
    if (a.token === '' && a.metricsToken === 'always') {
      ctx.addIssue({ code: 'custom', path: ['metricsToken'], message: "'always' needs admin.token (there is no token to ask for)" });
    }
  });

const callback = z
  .strictObject({
    host: host.default('127.0.0.1'),
    port: port.default(9091),
    path: z
      .string()
      .regex(/^\/\S*$/, "must start with '/'")
      .default('/callback'),
  })
  .prefault({});

const store = z.strictObject({ path: z.string().min(1).default('data/rotor.db') }).prefault({});

/** The connection log (src/connlog): one record per accepted connection, to the store and/or a file. */
const access = z
  .strictObject({
    /** Keep records (and the usage rollups) in the store. */
    store: z.boolean().default(true),
    /** JSON-lines file of records; '' = none. */
    file: z.string().default(''),
    /** Rotate the file at this size (e.g. 100M, 512K). */
    fileMaxSize: z
      .string()
      .regex(/^\d+[BKMG]$/, 'expected a size such as 100M, 512K or 1G')
      .default('100M'),
    /** Rotated files kept. */
    fileRotate: z.number().int().min(1).max(1000).default(10),
    /** false: records keep no target host:port. */
    targets: z.boolean().default(true),
    /** false: records keep no client source address (abuse reports need it; privacy rules may forbid it). */
    clients: z.boolean().default(true),
    retentionDays: z.number().min(0).default(7),
    /** Records held at most, at every moment: each write past it removes the oldest in the same step. */
    maxRecords: z.number().int().min(0).default(1_000_000),
    /**
     * Bytes of records held at most (their text fields plus 64 per record), enforced like maxRecords; e.g.
     * 256M, 512K, 1G. Refused-before-authentication attempts are one record per source address and result a minute.
     */
    maxSize: z
      .string()
      .regex(/^\d+[BKMG]$/, 'expected a size such as 256M, 512K or 1G')
      .default('256M'),
    /** Refusals before authentication are one record per source address, listener and result per this window. */
    refusalWindowMs: millis.default(60_000),
    /** Source addresses counted per window at most; past it, further sources are counted together as `*`. */
    refusalMaxSources: z.number().int().min(1).max(1_000_000).default(10_000),
    /** Records are written in batches this often (the most a crash can lose). */
    flushIntervalMs: millis.default(1000),
    batchSize: z.number().int().min(1).max(100_000).default(500),
    /** Records waiting at most; when full the oldest is dropped (rotor_connlog_dropped_total). */
    queueMax: z.number().int().min(1).default(50_000),
    /**
     * Open connections' bytes go into the usage rollups (and their `open` records into the store) this often:
     * an hour's row holds that hour's bytes, and a SIGKILL loses at most this much of an open connection.
     */
    checkpointMs: millis.default(60_000),
  })
  .prefault({});

const log = z
  .strictObject({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'), access })
  .prefault({});

/** Usage rollups and the amounts of GET /v1/usage. */
const billing = z
  .strictObject({
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/, 'expected an ISO 4217 code such as USD')
      .default('USD'),
    /** Quota periods (day, week, month) are calendar periods in this IANA time zone (src/users/period.ts). */
    timezone: z.string().refine(isTimeZone, 'must be an IANA time zone (e.g. UTC, Europe/Berlin)').default('UTC'),
    /** Price per GB (2^30 bytes, both directions) for users without their own; null = no amount. */
    defaultPricePerGb: z.number().min(0).nullable().default(null),
    /** Hour and day rollups kept this long. */
    usageRetentionDays: z.number().min(1).default(400),
    /**
     * Adopt the platform's usage figure into a user's meter when it is higher than Rotor's (never by
     * default: a customer is billed for the bytes Rotor relayed; the platform's figure is shown beside it).
     * In a fleet one daemon at a time adopts (a lease), so a gap is added once.
     */
    adoptPlatformUsage: z.boolean().default(false),
  })
  .prefault({});

/** User names and option values of the proxy user-name grammar; '-' separates options, so it is excluded. */
export const USER_NAME = /^[A-Za-z0-9_.]+$/;

const user = z.strictObject({
  // The sub account's appUsername is string(32) (seed 4.13).
  name: z
    .string()
    .regex(USER_NAME, "use only letters, digits, '_' and '.' ('-' separates user-name options)")
    .max(32)
    .refine((n) => n !== '.' && n !== '..', "'.' and '..' are not user names (a name must be one URL path segment)"),
  password: z.string().min(1).max(255),
  mainAccount: z.string().min(1).max(64).regex(/^\S+$/, 'must not contain spaces'),
  /** productNo drawn from; empty: the first dynamic product the merchant is authorized for. */
  product: z.string().default(''),
  draw: z.enum(['pwd', 'api']).default('pwd'),
  sessTime: z.number().int().min(SESS_TIME_MIN).max(SESS_TIME_MAX).default(5),
  limitBytes: z.number().int().min(-1).default(-1),
  /** Destination rules of this user, on top of proxy.rules (src/users/rules.ts). */
  rules: rulesSchema.optional(),
  /** Request rules of this user, before proxy.requestRules (src/proxy/request-rules.ts). */
  requestRules: requestRulesSchema.optional(),
  /** A dedicated port for this user (src/users/ports.ts); null or absent = none. */
  listen: listenSchema.nullable().optional(),
  /** Price per GB for GET /v1/usage amounts; null/absent = billing.defaultPricePerGb. */
  pricePerGb: z.number().min(0).nullable().optional(),
  // Users as data (src/users/record.ts): the same fields as a record made through the admin API.
  /** Per-period quota; when given it wins over limitBytes. */
  quota: quotaSchema.optional(),
  rateBytesPerSec: z.number().int().min(0).default(0),
  maxConnections: z.number().int().min(0).default(0),
  expiresAt: z
    .string()
    .refine((v) => Number.isFinite(Date.parse(v)), 'must be an RFC 3339 date-time')
    .nullable()
    .default(null),
  enabled: z.boolean().default(true),
  /** Always export this user's per-user metric series. */
  metrics: z.boolean().default(false),
  /** Static instances the user may name with `-instance-`; null/absent = every running instance (src/users/record.ts). */
  instances: z
    .array(
      z
        .string()
        .regex(/^[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)*$/)
        .max(64),
    )
    .max(1000)
    .nullable()
    .optional(),
  /** Products the user may name with `-product-` besides `product`; null/absent = every one, [] = `product` only. */
  products: productsSchema.nullable().optional(),
});

const users = z
  .array(user)
  .default([])
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    const ports = new Map<number, string>();
    list.forEach((u, i) => {
      if (seen.has(u.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate user name ${u.name}` });
      seen.add(u.name);
      const port = u.listen?.port ?? 0;
      if (port !== 0 && ports.has(port))
        ctx.addIssue({ code: 'custom', path: [i, 'listen', 'port'], message: `port ${port} is already ${ports.get(port)}'s` });
      if (port !== 0) ports.set(port, u.name);
    });
  });

/** How pools draw and judge upstreams (src/pool/pool.ts). */
const pool = z
  .strictObject({
    strategy: z.enum(['round_robin', 'least_connections', 'random']).default('round_robin'),
    /** Refill in the background when fewer ready nodes than this. */
    lowWater: z.number().int().min(0).default(2),
    /** Nodes asked for per draw. */
    drawBatch: z.number().int().min(1).max(100).default(5),
    /** Failures within failWindowMs that send a node cooling for coolDownMs. */
    maxFails: z.number().int().min(1).default(2),
    failWindowMs: millis.default(30_000),
    coolDownMs: millis.default(30_000),
    /** Longest a connection waits for a draw when its pool is empty. */
    acquireTimeoutMs: millis.default(10_000),
    /** A draw that brought only nodes already held (a backconnect gateway) is not repeated for this long, unless the pool empties or a node nears expiry. */
    redrawAfterMs: millis.default(60_000),
    /**
     * Warm upstream connections (src/proxy/warm.ts): per node up to perNode opened ahead (TCP; SOCKS5 greeted
     * and authenticated), at most maxPerPool per pool, each closed after idleMs unused. perNode 0 turns them
     * off; `off` lists products that never get them. Products sold by IP count never do. Both are ceilings: a set
     * holds what the tunnels arriving within one opening time need (a few at a few tunnels a second; under
     * hundreds a second bursts of 10–30 within a SOCKS5 greeting, and a set of 4 left most tunnels dialing fresh).
     */
    warm: z
      .strictObject({
        perNode: z.number().int().min(0).max(64).default(32),
        maxPerPool: z.number().int().min(0).max(1024).default(64),
        idleMs: millis.default(15_000),
        off: z.array(z.string().min(1)).max(1000).default([]),
      })
      .prefault({}),
    /** Pools (product × region) one user may hold; room is made by closing that user's least recently used idle pool. */
    maxPerUser: z.number().int().min(1).default(32),
    /**
     * Pools a user holding maxPerUser may open per minute in place of others (each closes its least recently used
     * idle one), after a burst of 2 × maxPerUser; past it a new region or product is refused (403) rather than
     * drawn for with every connection (src/pool/registry.ts).
     */
    replacePerMinute: z.number().int().min(0).max(100_000).default(6),
    /** A pool unused this long (and with nothing in use) is closed; longer than any session (120 min) by default. */
    idleEvictMs: millis.default(7_800_000),
    /**
     * Background probes (src/health/prober.ts): failed nodes return to service only after one passes; idle
     * ready nodes are probed one per pool per intervalMs. `url`: an http(s) URL fetched through the node
     * as part of each probe ('' = connect and handshake only).
     */
    healthCheck: z
      .strictObject({
        url: z.union([z.literal(''), z.url({ protocol: /^https?$/ })]).default(''),
        intervalMs: millis.default(30_000),
      })
      .prefault({}),
    // ── TLS to upstreams (src/proxy/dial-tls.ts) ──
    /**
     * Nodes whose line says `https://` are dialed over TLS. `verify`: check their certificate (default true);
     * `insecureProducts`: productNos whose gateways use self-signed certificates, dialed without the check
     * (logged once per node); `caFile`: a PEM file of CAs trusted besides the system's ('' = none).
     */
    tls: z
      .strictObject({
        verify: z.boolean().default(true),
        insecureProducts: z.array(z.string().min(1)).default([]),
        caFile: z.string().default(''),
      })
      .prefault({}),
    /**
     * Outlier ejection (src/pool/outlier.ts), as Envoy: a node failing `consecutiveFailures` times in a row,
     * or `failurePercent` of at least `minRequests` attempts within `intervalMs`, is out of service for
     * baseEjectionMs × its ejections so far (at most maxEjectionMs); never more than maxEjectedPercent of a
     * pool at once (at least one node). 0 turns a trigger off; maxEjectedPercent 0 turns ejection off.
     */
    outlier: z
      .strictObject({
        consecutiveFailures: z.number().int().min(0).default(5),
        failurePercent: z.number().int().min(0).max(100).default(85),
        minRequests: z.number().int().min(1).default(20),
        intervalMs: millis.default(60_000),
        baseEjectionMs: millis.default(30_000),
        maxEjectionMs: millis.default(300_000),
        maxEjectedPercent: z.number().int().min(0).max(100).default(10),
      })
      .prefault({}),
  })
  .prefault({});

/** Static-order tracking (src/orders/tracker.ts). */
const orders = z
  .strictObject({
    pollInitialMs: millis.default(2_000),
    pollMaxMs: millis.default(60_000),
    sweepMs: millis.default(30_000),
    expiryWarnHours: z.number().min(0).default(72),
    autoRenew: z
      .strictObject({
        enabled: z.boolean().default(false),
        hoursBefore: z.number().min(0).default(24),
        cycleTimes: z.number().int().min(1).default(1),
      })
      .prefault({}),
  })
  .prefault({});

/** Dynamic accounts, balances and counters (src/accounts/, src/accounting/). */
const accounts = z
  .strictObject({
    /** The address the platform sees Rotor's proxy connections come from, whitelisted for `draw: api` users. */
    egressIp: z.string().min(1).default('127.0.0.1'),
    /** ProxyInfo poll interval per (main account, product). */
    balancePollMs: millis.default(60_000),
    /** Platform-side limit and usage reconciliation interval. */
    limitSyncMs: millis.default(60_000),
    /** How often per-user byte counters are written to the store (the most a crash can lose). */
    flushIntervalMs: millis.default(2_000),
    /** In embedded mode only: MB credited to a (main account, product) that has no traffic; 0 = none. */
    sandboxFlowMb: z.number().int().min(0).default(10_240),
    /** Users at scale: platform calls at once for the background check of every user (start, reload) and for a batch's sub accounts. */
    platformConcurrency: z.number().int().min(1).max(256).default(16),
    /**
     * POST /v1/users/batch: rows whose platform step (the sub account) may run at once. How many do is a window
     * (src/users/sub-account.ts): 16 at first, growing up to this while the platform answers, halved when it
     * answers like an overloaded one (a retried timeout, HTTP 429 or 5xx, code 500).
     */
    batchConcurrency: z.number().int().min(1).max(256).default(64),
  })
  .prefault({});

/** Several daemons on one Redis (`store.path: redis://…`); ignored with a SQLite store (src/fleet/). */
const fleet = z
  .strictObject({
    /** Key prefix every daemon of one fleet shares (two fleets on one Redis use different prefixes). */
    prefix: z.string().min(1).default('rotor:'),
    /** This daemon's identity in the fleet; empty: hostname:pid:random. */
    instanceId: z.string().default(''),
    /** Most bytes of one user's allowance a daemon holds at a time; size it by the users' peak rate (README "Running a fleet"). */
    sliceBytes: z.number().int().min(1024).default(8_388_608),
    /** Bytes a daemon may spend per user on its own while Redis is unreachable (once per outage); 0 = none. */
    offlineBytes: z.number().int().min(0).default(1_048_576),
    /**
     * Most a daemon spends per user on its own in one Redis outage: its share of what the user has left (what
     * nobody holds, divided among the live daemons), cut to this; 0 = 16 × sliceBytes. Never below offlineBytes.
     */
    outageMaxBytes: z.number().int().min(0).default(0),
    /** A daemon silent this long (dead, partitioned) has its allowance leases handed back to the others. */
    aliveTtlMs: millis.default(10_000),
    /** Order-tracking lease: another daemon takes an order over this long after its tracker died. */
    leaseTtlMs: millis.default(15_000),
  })
  .prefault({});

/** Events and their webhook (src/events/). */
const events = z
  .strictObject({
    /** Where events are POSTed; empty: events are only listed by GET /v1/events. */
    webhookUrl: z
      .string()
      .default('')
      .refine((u) => u === '' || /^https?:\/\/[^\s]+$/i.test(u), { message: 'must be an http:// or https:// URL' }),
    /** HMAC-SHA256 key of the X-Rotor-Signature header. */
    secret: z.string().default(''),
    /** One POST, until the answer's status line. */
    timeoutMs: millis.default(10_000),
    /** Retries: this delay doubled per failed attempt, up to retryMaxMs (times a random factor in [1, 1.5)). */
    retryBaseMs: millis.default(1_000),
    retryMaxMs: millis.default(300_000),
    /** How often the outbox is looked at when nothing new was written. */
    pollMs: millis.default(1_000),
    /** How often quota thresholds and expiries are checked (off the data path). */
    checkMs: millis.default(1_000),
    /** Delivered events are listed this long, then pruned. */
    retentionDays: z.number().int().min(1).default(30),
    /** balance.low: a dynamic balance under this many MB (or exhausted). */
    balanceLowMb: z.number().min(0).default(1024),
  })
  .prefault({})
  .superRefine((e, ctx) => {
    if (e.webhookUrl !== '' && e.secret === '')
      ctx.addIssue({ code: 'custom', path: ['secret'], message: 'required when events.webhookUrl is set (receivers check the signature)' });
  });

/** Per-user metric series are exported for at most this many users (src/users/series.ts). */
const metricsSection = z.strictObject({ userSeriesMax: z.number().int().min(0).max(10_000).default(100) }).prefault({});

// ── The customer portal (src/portal/) ──
/** Paths the admin listener already answers; the portal may not sit on or under them. */
const TAKEN_PATHS = ['/v1/', '/ui/', '/docs/', '/healthz/', '/readyz/', '/metrics/'];
const portal = z
  .strictObject({
    /** The customers' panel: sign in with the proxy user name and password; on by default (loopback admin). */
    enabled: z.boolean().default(true),
    /** Where it is served, on the admin listener (or on its own, below): '/x/' form. */
    path: z
      .string()
      .max(64)
      .regex(/^\/(?:[A-Za-z0-9_-]+\/)+$/, "expected a path such as '/portal/' (letters, digits, '-', '_', ending in '/')")
      .refine((p) => !TAKEN_PATHS.some((t) => p.toLowerCase().startsWith(t)), { message: `must not be under ${TAKEN_PATHS.join(', ')}` })
      .default('/portal/'),
    /** Its own listener instead of the admin one (both or neither). */
    host: host.optional(),
    port: port.optional(),
    /** PEM files: the portal's own listener over TLS (session cookies are then Secure). */
    tls: z.strictObject({ cert: z.string().min(1), key: z.string().min(1) }).optional(),
    /** Mark the session cookie Secure although Rotor itself speaks plain HTTP (behind a TLS terminator). */
    secureCookie: z.boolean().default(false),
    /** The host name customers' endpoints name (the proxy's public name); default: the proxy listener's host. */
    proxyHost: z
      .string()
      .min(1)
      .max(253)
      .regex(/^[A-Za-z0-9.:[\]-]+$/, 'expected a host name or an IP address')
      .optional(),
    /** A session ends after this long without a request, and after `sessionMaxHours` in any case. */
    sessionIdleMinutes: z
      .number()
      .int()
      .min(1)
      .max(24 * 60)
      .default(60),
    sessionMaxHours: z
      .number()
      .int()
      .min(1)
      .max(24 * 30)
      .default(12),
    /** Wrong passwords per user name (and per client address) before each next try waits, doubling up to maxDelaySeconds. */
    login: z
      .strictObject({
        freeFailures: z.number().int().min(1).max(100).default(3),
        maxDelaySeconds: z.number().int().min(1).max(86_400).default(900),
      })
      .prefault({}),
  })
  .prefault({})
  .superRefine((p, ctx) => {
    if ((p.host === undefined) !== (p.port === undefined))
      ctx.addIssue({ code: 'custom', path: [p.host === undefined ? 'host' : 'port'], message: 'portal.host and portal.port go together' });
    if (p.tls && p.port === undefined)
      ctx.addIssue({ code: 'custom', path: ['tls'], message: "needs the portal's own listener (portal.host, portal.port)" });
  });

export const configSchema = z
  .strictObject({
    platform,
    proxy,
    pool,
    admin,
    callback,
    store,
    log,
    users,
    orders,
    accounts,
    fleet,
    billing,
    events,
    metrics: metricsSection,
    portal,
  })
  .superRefine(userPortsFree)
  .superRefine(userPortsTls);

// ── TLS on users' own ports: the certificate is proxy.https's, so there must be one ──
function userPortsTls(
  c: { proxy: { https?: unknown }; users: Array<{ listen?: { tls?: boolean | undefined } | null | undefined }> },
  ctx: z.RefinementCtx,
): void {
  if (c.proxy.https !== undefined) return;
  c.users.forEach((u, i) => {
    if (u.listen?.tls === true)
      ctx.addIssue({
        code: 'custom',
        path: ['users', i, 'listen', 'tls'],
        message: 'no certificate to serve; configure proxy.https (cert, key), whose pair user ports use',
      });
  });
}

// ── abuse bounds: a user's own port may not be one of the daemon's listeners ──
function userPortsFree(
  c: {
    proxy: z.output<typeof proxy>;
    admin: { port: number };
    callback: { port: number };
    portal: { port?: number | undefined };
    users: z.output<typeof users>;
  },
  ctx: z.RefinementCtx,
): void {
  const taken = new Map<number, string>();
  const add = (port: number | undefined, key: string): void => {
    if (port !== undefined && port !== 0 && !taken.has(port)) taken.set(port, key);
  };
  add(c.proxy.http.port, 'proxy.http.port');
  add(c.proxy.socks5.port, 'proxy.socks5.port');
  add(c.proxy.https?.port, 'proxy.https.port');
  add(c.admin.port, 'admin.port');
  add(c.callback.port, 'callback.port');
  add(c.portal.port, 'portal.port');
  c.users.forEach((u, i) => {
    const port = u.listen?.port ?? 0;
    const key = taken.get(port);
    if (port !== 0 && key !== undefined)
      ctx.addIssue({ code: 'custom', path: ['users', i, 'listen', 'port'], message: `port ${port} is already ${key}` });
  });
}

export type Config = z.output<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;
export type UserConfig = Config['users'][number];
export type PlatformConfig = Config['platform'];
