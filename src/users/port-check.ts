// A user's `listen.port` is checked before the user is written (POST/PATCH /v1/users): taken by another user,
// by one of this daemon's listeners, or bound by another process → PortInUseError (409 PORT_IN_USE), instead of
// a 201 followed by a port that never opens (EADDRINUSE in the log only).
import { createServer } from 'node:net';
import { PortInUseError, UserInvalidError } from './errors.ts';

export interface PortCheckOptions {
  /** Where user ports are bound (proxy.http.host). */
  host: string;
  /** This daemon's own listener ports (proxy, admin, callback, portal), with what each is. */
  reserved: () => ReadonlyMap<number, string>;
  /** Whether user ports can have TLS: the certificate of proxy.https is configured. */
  tls?: boolean;
}

/** A `listen.tls` asked for where there is no certificate (no proxy.https): UserInvalidError naming both keys. */
export function checkUserTls(options: PortCheckOptions | undefined, listen: { tls?: boolean | undefined } | null | undefined): void {
  if (listen?.tls === true && options !== undefined && options.tls !== true)
    throw new UserInvalidError('listen.tls: no certificate to serve; configure proxy.https (cert, key), whose pair user ports use');
}

/** Whether `port` can be bound on `host` now (bound and released at once). */
export function probePort(host: string, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err));
    s.listen({ host, port, exclusive: true }, () => s.close(() => resolve(undefined)));
  });
}

/**
 * Throws PortInUseError when `port` (asked for by `user`; 0 = any free port) is another user's (`owner`),
 * one of the daemon's own, or bound by someone else.
 */
export async function checkUserPort(
  options: PortCheckOptions,
  user: string,
  port: number,
  owner: (port: number) => string | undefined,
): Promise<void> {
  if (port === 0) return;
  const other = owner(port);
  if (other !== undefined && other !== user) throw new PortInUseError(port, `user ${other}'s port`);
  const own = options.reserved().get(port);
  if (own !== undefined) throw new PortInUseError(port, own);
  if (other === user) return; // already this user's: its open port holds it
  const err = await probePort(options.host, port);
  if (err?.code === 'EADDRINUSE') throw new PortInUseError(port, 'bound by another process');
  if (err) throw new PortInUseError(port, `cannot be bound: ${err.code ?? err.message}`);
}

/** The daemon's listener ports by number (`{ 'admin.port': 9090, … }` → 9090 → 'admin.port'); 0 and absent skipped. */
export function portsByNumber(ports: Record<string, number | undefined>): Map<number, string> {
  const out = new Map<number, string>();
  for (const [key, port] of Object.entries(ports)) if (port !== undefined && port !== 0 && !out.has(port)) out.set(port, key);
  return out;
}
