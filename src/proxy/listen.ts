// Binding a listener's server: the same for the HTTP, HTTPS and SOCKS5 listeners.
import type { AddressInfo, Server } from 'node:net';
import { listenWithNoDelay } from './no-delay.ts';

/**
 * Starts `server` listening (loopback unless a host is given), its listening socket carrying TCP_NODELAY for
 * the sockets it accepts (no-delay.ts); resolves with the bound address.
 */
export function listenOn(server: Server, port: number, host = '127.0.0.1'): Promise<{ host: string; port: number }> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      listenWithNoDelay(server);
      const a = server.address() as AddressInfo;
      resolve({ host: a.address, port: a.port });
    });
  });
}

/** The port `server` is bound to; 0 before it listens or after it closed. */
export function boundPort(server: Server): number {
  return (server.address() as AddressInfo | null)?.port ?? 0;
}
