// How a user draws from a product, decided by the product record (seed 2.6) rather than assumed:
//   pwdDrawProxyUser     1: sub accounts may draw by password; otherwise only the main account may
//   ipWhiteList          1: the API draw (extraction link from a whitelisted address) is available
//   proxyGlobalRandom    1: a password draw may leave the region empty (mixed); apiDrawGlobalRandom: the API draw
//   proxyEverytimeChange 1: sessTime 0/-1 (a new exit on every use) is honoured; otherwise it means 5 minutes
//   pwdDrawSessionRange  "lo-hi" minutes a password draw's session may last
//   ipCount/ipDuration   sold by IP count: each exit spends one IP of the package and lasts ipDuration minutes
// Where the product refuses what the user's config asks, the plan uses what the product allows and says why
// (notes, logged once at warn); only where nothing fits is the plan a refusal with the reason.

/** The product fields drawing depends on (numbers may be absent: the seed's defaults apply). */
export interface DrawProductRecord {
  productNo: string;
  proxyType?: number | null | undefined;
  /** Seed 2.6: 1 socks5, 2 http, 3 https, 4 ssh; may list several ("1,2"). */
  protocol?: string | number | null | undefined;
  pwdDrawProxyUser?: number | null | undefined;
  pwdDrawSessionRange?: string | null | undefined;
  proxyEverytimeChange?: number | null | undefined;
  proxyGlobalRandom?: number | null | undefined;
  apiDrawGlobalRandom?: number | null | undefined;
  ipWhiteList?: number | null | undefined;
  ipCount?: number | null | undefined;
  ipDuration?: number | null | undefined;
}

export interface DrawPlanUser {
  name: string;
  mainAccount: string;
  draw: 'pwd' | 'api';
  /** minutes; 0/-1 = a new exit on every use */
  sessTime: number;
}

export interface DrawPlanOk {
  ok: true;
  method: 'pwd' | 'api';
  /** appUsername of the draw: the user's sub account, or the main account where sub accounts may not draw */
  account: string;
  asMainAccount: boolean;
  /** sessTime sent with a password draw (minutes) */
  sessTime: number;
  /** sold by IP count: keep each drawn exit this many minutes, one IP per exit, never past what remains */
  byIp?: { ipDurationMinutes: number };
  notes: string[];
}
export type DrawPlan = DrawPlanOk | { ok: false; reason: string; notes: string[] };

const DEFAULT_SESSION = 5;

function range(text: string | null | undefined): { lo: number; hi: number } | undefined {
  const m = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(text ?? '');
  if (!m) return undefined;
  const lo = Number(m[1]);
  const hi = Number(m[2]);
  return lo <= hi ? { lo, hi } : undefined;
}

export function planDraw(user: DrawPlanUser, p: DrawProductRecord, region: string): DrawPlan {
  const notes: string[] = [];
  const subsMayDraw = p.pwdDrawProxyUser === 1;
  const whitelist = p.ipWhiteList === 1;
  const globalPwd = p.proxyGlobalRandom === 1;
  const globalApi = p.apiDrawGlobalRandom === 1;
  const product = p.productNo;

  let method: 'pwd' | 'api' = user.draw;
  if (method === 'api' && !whitelist) {
    method = 'pwd';
    notes.push(`${product} has no IP whitelist (ipWhiteList -1): ${user.name} draws by password instead of by API`);
  }
  if (region === '') {
    const allowed = method === 'pwd' ? globalPwd : globalApi;
    if (!allowed) {
      const other: 'pwd' | 'api' = method === 'pwd' ? 'api' : 'pwd';
      const otherAllowed = other === 'pwd' ? globalPwd : globalApi && whitelist;
      if (!otherAllowed) {
        return {
          ok: false,
          reason: `${product} does not draw from a mixed region (proxyGlobalRandom/apiDrawGlobalRandom -1): name a region in the proxy user name (${user.name}-region-<code>)`,
          notes,
        };
      }
      notes.push(
        `${product} draws a mixed region only by ${other === 'api' ? 'API (apiDrawGlobalRandom 1)' : 'password (proxyGlobalRandom 1)'}: ${user.name} draws that way when no region is named`,
      );
      method = other;
    }
  }
  if (method === 'api')
    return { ok: true, method, account: user.mainAccount, asMainAccount: true, sessTime: user.sessTime, notes, ...byIp(p) };

  let account = user.name;
  let asMainAccount = false;
  if (!subsMayDraw) {
    account = user.mainAccount;
    asMainAccount = true;
    notes.push(
      `${product} does not let sub accounts draw by password (pwdDrawProxyUser -1): ${user.name} draws as the main account ${user.mainAccount}; ` +
        `its traffic is charged to the main account (Rotor's own limit for ${user.name} still applies)`,
    );
  }

  const ip = byIp(p);
  let sessTime = user.sessTime;
  if (ip.byIp) sessTime = ip.byIp.ipDurationMinutes;
  if ((sessTime === 0 || sessTime === -1) && p.proxyEverytimeChange !== 1) {
    notes.push(
      `${product} does not change the exit on every use (proxyEverytimeChange -1): ${user.name}'s draws keep an exit ${DEFAULT_SESSION} minutes`,
    );
    sessTime = DEFAULT_SESSION;
  }
  const r = range(p.pwdDrawSessionRange);
  if (r && sessTime > 0 && (sessTime < r.lo || sessTime > r.hi)) {
    const clamped = Math.min(r.hi, Math.max(r.lo, sessTime));
    notes.push(
      `${product} allows password-draw sessions of ${r.lo}-${r.hi} minutes (pwdDrawSessionRange): ${user.name}'s ${sessTime} becomes ${clamped}`,
    );
    sessTime = clamped;
  }
  if (ip.byIp && sessTime !== ip.byIp.ipDurationMinutes)
    ip.byIp.ipDurationMinutes = Math.max(1, Math.min(ip.byIp.ipDurationMinutes, sessTime));
  return { ok: true, method: 'pwd', account, asMainAccount, sessTime, notes, ...ip };
}

function byIp(p: DrawProductRecord): { byIp?: { ipDurationMinutes: number } } {
  if (!(Number(p.ipCount ?? 0) > 0)) return {};
  const minutes = Number(p.ipDuration ?? 0);
  return { byIp: { ipDurationMinutes: minutes > 0 ? minutes : DEFAULT_SESSION } };
}

/** One line per user for `rotor check-config` and the start-up log. */
export function describePlan(user: DrawPlanUser, productNo: string, plan: DrawPlan): string {
  if (!plan.ok) return `${user.name} on ${productNo}: REFUSED: ${plan.reason}`;
  const how =
    plan.method === 'api'
      ? `API draw for ${plan.account}`
      : `password draw as ${plan.asMainAccount ? 'main account ' : ''}${plan.account}, sessTime ${plan.sessTime}`;
  const ip = plan.byIp ? `, one IP per exit kept ${plan.byIp.ipDurationMinutes} min` : '';
  return `${user.name} on ${productNo}: ${how}${ip}${plan.notes.length ? ` (${plan.notes.length} adjustment${plan.notes.length > 1 ? 's' : ''})` : ''}`;
}

export interface PlannedUser {
  user: DrawPlanUser;
  productNo: string;
  /** undefined: the product record could not be read (the message says why) */
  plan?: DrawPlan;
  error?: string;
}

/**
 * Plans every user's default product (start-up and `rotor check-config`): the users whose config the product
 * refuses or adjusts are reported once, here, rather than discovered by their clients.
 */
export async function planUsers(
  users: ReadonlyArray<DrawPlanUser & { product: string }>,
  product: (productNo: string) => Promise<DrawProductRecord | undefined>,
): Promise<PlannedUser[]> {
  const out: PlannedUser[] = [];
  for (const user of users) {
    if (!user.product) {
      out.push({ user, productNo: '', error: 'no dynamic product to draw from' });
      continue;
    }
    try {
      const record = await product(user.product);
      if (!record) out.push({ user, productNo: user.product, error: `product ${user.product} is not authorized for the merchant` });
      else out.push({ user, productNo: user.product, plan: planDraw(user, record, '') });
    } catch (err) {
      out.push({ user, productNo: user.product, error: err instanceof Error ? err.message : String(err) });
    }
  }
  return out;
}
