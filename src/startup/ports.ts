// Startup order (issue 13): Rotor must know it can serve before it changes anything on the platform. In remote
// mode the reconcile step creates accounts and edits whitelists for real; a daemon that then dies on a taken
// port has made those changes for nothing, and said only "internal error". So every configured listener
// address is bound here first, all at once (which also catches two listeners given the same address), and
// released again just before the listeners take them; a failure names the config key, and the CLI exits 2.
// The listeners' own listen() goes through listenAs(), so the (millisecond) window between the two binds
// still ends in the same named error rather than an internal one.
import { createServer, type Server } from 'node:net';
import { RotorError } from '../errors/rotor-error.ts';

/** A configured listener address Rotor cannot bind. `key` is the config key (`admin.port`). */
export class ListenAddressError extends RotorError {
  readonly key: string;
  constructor(key: string, message: string, cause?: unknown) {
    super('LISTEN_FAILED', `${key}: ${message}`, { cause });
    this.key = key;
  }
}

export interface ListenAddress {
  /** the config section, e.g. `admin`, `proxy.http` */
  section: string;
  host: string;
  port: number;
}

const shown = (host: string, port: number) => `${host.includes(':') ? `[${host}]` : host}:${port}`;

function explain(a: ListenAddress, err: NodeJS.ErrnoException): ListenAddressError {
  switch (err.code) {
    case 'EADDRINUSE':
      return new ListenAddressError(`${a.section}.port`, `${shown(a.host, a.port)} is in use`, err);
    case 'EACCES':
      return new ListenAddressError(`${a.section}.port`, `${shown(a.host, a.port)}: not permitted (ports below 1024 need privileges)`, err);
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new ListenAddressError(`${a.section}.host`, `${a.host} is not an address of this machine`, err);
    default:
      return new ListenAddressError(`${a.section}.port`, `${shown(a.host, a.port)} cannot be bound (${err.code ?? err.message})`, err);
  }
}

function bind(a: ListenAddress): Promise<Server> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', (err: NodeJS.ErrnoException) => reject(explain(a, err)));
    s.listen({ host: a.host, port: a.port, exclusive: true }, () => resolve(s));
  });
}

const close = (s: Server) => new Promise<void>((resolve) => s.close(() => resolve()));

/**
 * Binds every address (port 0 = any free port: nothing to check) and releases them. Rejects with the first
 * ListenAddressError, in the order given.
 */
export async function checkListenAddresses(addresses: readonly ListenAddress[]): Promise<void> {
  const held: Server[] = [];
  try {
    for (const a of addresses) if (a.port !== 0) held.push(await bind(a));
  } finally {
    await Promise.all(held.map(close));
  }
}

/** Runs a listener's listen(), turning an address failure into the ListenAddressError naming `address`'s key. */
export async function listenAs<T>(address: ListenAddress, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL') throw explain(address, err as NodeJS.ErrnoException);
    throw err;
  }
}
