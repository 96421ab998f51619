// Loopback ports for tests and the bench: a free one, and waiting until a child process listens on one.
import { connect, createServer, type AddressInfo } from 'node:net';

export class SetupError extends Error {
  readonly code = 'TEST_SETUP';
  constructor(message: string) {
    super(message);
    this.name = 'SetupError';
  }
}

/** A loopback port nothing listens on (bound, read and released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Resolves once 127.0.0.1:port accepts a connection; SetupError after `deadlineMs`. */
export function waitForPort(port: number, deadlineMs = 5000): Promise<void> {
  const until = Date.now() + deadlineMs;
  return new Promise((resolve, reject) => {
    const attempt = (): void => {
      const s = connect({ host: '127.0.0.1', port });
      s.once('connect', () => {
        s.destroy();
        resolve();
      });
      s.once('error', () => {
        s.destroy();
        if (Date.now() > until) reject(new SetupError(`port ${port} never opened`));
        else setTimeout(attempt, 25);
      });
    };
    attempt();
  });
}
