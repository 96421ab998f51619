// The sandbox's real upstream proxies on loopback: the password gateway, whitelist ports and static
// instance endpoints. They move and meter bytes; who may relay is the platform side's call (UpstreamAuthority).
import type { DrawnCredential, Fault, Upstreams, UpstreamAuthority } from '../contracts.ts';
import { UpstreamError } from './errors.ts';
import { Exits, exitAddresses } from './exits.ts';
import { UpstreamPort, type Admission, type AdmissionPolicy, type PortTimeouts } from './port.ts';
import { decodeUsername, encodeUsername } from './username.ts';

export { decodeUsername, encodeUsername } from './username.ts';
export { UpstreamError, type UpstreamErrorCode } from './errors.ts';

export interface UpstreamsOptions {
  authority: UpstreamAuthority;
  /** listening address of every upstream port; default 127.0.0.1 */
  host?: string;
  /** how many password-gateway ports; default 4 */
  gatewayPorts?: number;
  /** how many exit addresses, 127.0.0.2 .. 127.0.0.(1+n); default 8 */
  exits?: number;
  /** clock for sticky sessions (ms); default Date.now */
  now?: () => number;
  /** first byte, SOCKS5 handshake and HTTP request head; default 10 s */
  handshakeTimeoutMs?: number;
  /** connecting to the target; default 10 s */
  connectTimeoutMs?: number;
}

export async function startUpstreams(opts: UpstreamsOptions): Promise<Upstreams> {
  const host = opts.host ?? '127.0.0.1';
  const gatewayCount = opts.gatewayPorts ?? 4;
  if (!Number.isInteger(gatewayCount) || gatewayCount < 0) {
    throw new UpstreamError('UPSTREAM_BAD_OPTIONS', 'gatewayPorts must be a whole number');
  }
  const { authority } = opts;
  const exits = new Exits(exitAddresses(opts.exits ?? 8), opts.now ?? Date.now);
  const timeouts: PortTimeouts = {
    handshakeMs: opts.handshakeTimeoutMs ?? 10_000,
    connectMs: opts.connectTimeoutMs ?? 10_000,
  };
  const faults = new Map<number | '*', Fault>();
  const faultFor = (port: number): Fault | undefined => faults.get(port) ?? faults.get('*');
  const ports = new Set<UpstreamPort>();
  const whitelist = new Map<string, Promise<UpstreamPort>>();
  const instances = new Map<string, Promise<UpstreamPort>>();
  let closed = false;

  async function open(policy: AdmissionPolicy, preferred = 0): Promise<UpstreamPort> {
    if (closed) throw new UpstreamError('UPSTREAM_CLOSED', 'the upstreams are closed');
    const port = new UpstreamPort(policy, faultFor, timeouts);
    ports.add(port);
    await port.listen(host, preferred);
    return port;
  }
  /** Opens once per key; a failed open is forgotten so the next call tries again. */
  function openOnce(
    table: Map<string, Promise<UpstreamPort>>,
    key: string,
    policy: () => AdmissionPolicy,
    preferred = 0,
  ): Promise<UpstreamPort> {
    let opening = table.get(key);
    if (!opening) {
      opening = open(policy(), preferred);
      table.set(key, opening);
      opening.catch(() => table.delete(key));
    }
    return opening;
  }

  const gatewayPolicy = passwordGatewayPolicy(authority, exits);

  const gateways: UpstreamPort[] = [];
  try {
    for (let i = 0; i < gatewayCount; i++) gateways.push(await open(gatewayPolicy));
  } catch (err) {
    await Promise.all([...ports].map((p) => p.close()));
    throw err;
  }

  async function closeAll(): Promise<void> {
    closed = true;
    await Promise.all([...ports].map((p) => p.close()));
    ports.clear();
    whitelist.clear();
    instances.clear();
  }

  return {
    host,
    gatewayPorts: gateways.map((p) => p.port),
    exitAddresses: exits.addresses,
    encodeUsername: (credential: DrawnCredential) => encodeUsername(credential),

    async whitelistPort(account: string, productNo: string): Promise<number> {
      const port = await openOnce(whitelist, `${account}\u0000${productNo}`, () => ({
        auth: 'none',
        admit({ clientIp }): Admission {
          const grant = authority.authorizeWhitelist(account, productNo, clientIp);
          if (!grant.ok) return { ok: false, reason: grant.reason, refusal: grant.refusal ?? 'forbidden' };
          return { ok: true, meter: grant.meter, exit: exits.rotate() };
        },
      }));
      return port.port;
    },

    async instancePort(instanceNo: string, preferred?: number): Promise<number> {
      const exit = exits.fixed(instanceNo);
      const port = await openOnce(instances, instanceNo, () => instancePolicy(authority, instanceNo, exit), preferred ?? 0);
      return port.port;
    },

    async closeInstance(instanceNo: string): Promise<void> {
      const opening = instances.get(instanceNo);
      if (!opening) return;
      instances.delete(instanceNo);
      let port: UpstreamPort;
      try {
        port = await opening;
      } catch {
        return;
      }
      faults.delete(port.port);
      ports.delete(port);
      await port.close();
    },

    setUdp(enabled: boolean): void {
      for (const p of ports) p.udp = enabled;
    },

    setFault(port: number | '*', fault: Fault | null): void {
      if (fault) faults.set(port, { ...fault });
      else faults.delete(port);
    },

    close: closeAll,
  };
}

/** A static instance's port: its current credentials, always the same exit. */
function instancePolicy(authority: UpstreamsOptions['authority'], instanceNo: string, exit: string): AdmissionPolicy {
  return {
    auth: 'password',
    admit({ username, password }): Admission {
      const grant = authority.authorizeInstance(instanceNo, username, password);
      if (!grant.ok) return { ok: false, reason: grant.reason, refusal: grant.refusal ?? 'credentials' };
      return { ok: true, meter: grant.meter, exit };
    },
  };
}

/** The gateway ports' admission: a drawn user name and password, a sticky exit for a session, else the next. */
function passwordGatewayPolicy(authority: UpstreamsOptions['authority'], exits: Exits): AdmissionPolicy {
  return {
    auth: 'password',
    admit({ username, password }): Admission {
      const credential = decodeUsername(username);
      if (!credential) return { ok: false, reason: 'unknown user name', refusal: 'credentials' };
      const grant = authority.authorizePassword(credential, password);
      if (!grant.ok) return { ok: false, reason: grant.reason, refusal: grant.refusal ?? 'credentials' };
      const exit =
        credential.sessTime > 0 ? exits.sticky(`${credential.account}\u0000${credential.sessionId}`, credential.sessTime) : exits.rotate();
      return { ok: true, meter: grant.meter, exit };
    },
  };
}
