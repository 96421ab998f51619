// Loopback ports for tests and the bench: a free one, and waiting until a child process listens on one.
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';

export class SetupError extends Error {
  readonly code = 'TEST_SETUP';
  constructor(message: string) {
    super(message);
    this.name = 'SetupError';
  }
}

/**
 * A loopback port nothing listens on, for a process that binds it later (a child daemon, redis-server, squid): one
 * below the kernel's ephemeral range (restartablePort). A port the kernel handed out from that range and took back
 * may be given again, before the process binds it, to any outgoing connection on the machine (another test file's
 * client, a daemon's platform calls): with two suites at once, `rotor start` failed "admin.port … is in use".
 */
export function freePort(): Promise<number> {
  return restartablePort();
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

/** The kernel's ephemeral range's first port (outgoing connections take their local ports from that range). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 2048 ? low : 32768;
  } catch {
    return 32768;
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * A free loopback port BELOW the kernel's ephemeral range, for a daemon that is killed and restarted on the
 * same ports: a port from `freePort()` is an ephemeral one, so between the kill and the restart any outgoing
 * connection on the machine (another test file's client, the daemon's own platform calls) may be given it
 * as its local port, and the restart then fails with "is in use" (seen in test/reliability/crash).
 */
export async function restartablePort(): Promise<number> {
  const high = ephemeralLow();
  const low = Math.max(1024, high - 12_000);
  for (let i = 0; i < 200; i++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (await bindable(port)) return port;
  }
  throw new SetupError(`no free port between ${low} and ${high}`);
}
