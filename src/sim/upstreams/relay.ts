// Dials the target from an exit address and moves bytes both ways, charging every byte to the grant's meter.
// One closure set per connection; per chunk only the meter call and the write.
import { connect, isIPv6, type Socket } from 'node:net';
import type { Meter } from '../contracts.ts';

export interface DialOptions {
  host: string;
  port: number;
  /** loopback source address the target will see */
  exit: string;
  timeoutMs: number;
}

/** Connects to the target; resolves once connected, rejects with the socket error (code ECONNREFUSED, ...). */
export function dial(options: DialOptions): Promise<Socket> {
  return new Promise((resolve, reject) => {
    // An IPv6 target cannot be reached from an IPv4 exit; every other name is resolved to IPv4 so the exit binds.
    const target = isIPv6(options.host)
      ? connect({ host: options.host, port: options.port, allowHalfOpen: true, noDelay: true })
      : connect({ host: options.host, port: options.port, localAddress: options.exit, family: 4, allowHalfOpen: true, noDelay: true });
    const timer = setTimeout(() => {
      target.destroy(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' }));
    }, options.timeoutMs);
    target.once('connect', () => {
      clearTimeout(timer);
      target.off('error', onError);
      resolve(target);
    });
    function onError(err: Error): void {
      clearTimeout(timer);
      reject(err);
    }
    target.once('error', onError);
  });
}

export interface RelayOptions {
  meter: Meter;
  /** 'reset' fault: relay this many bytes (both directions together), then reset the client */
  resetAfter?: number;
  /** client bytes already read past the handshake, forwarded (and charged) first */
  initial?: Buffer | null;
  /** what of each chunk read from the target is passed on (http-head.ts ClosingHeads for a plain request) */
  fromTarget?: (chunk: Buffer) => Buffer;
}

/** Relays until either side ends; both sockets are destroyed on error, exhaustion or reset. */
export function relay(client: Socket, target: Socket, options: RelayOptions): void {
  const { meter } = options;
  const limit = options.resetAfter ?? Infinity;
  let relayed = 0;
  let over = false;

  const stop = (): void => {
    if (over) return;
    over = true;
    client.destroy();
    target.destroy();
  };
  const reset = (): void => {
    if (over) return;
    over = true;
    if (!client.destroyed) client.resetAndDestroy();
    target.destroy();
  };
  const forward = (chunk: Buffer, from: Socket, to: Socket): void => {
    if (over) return;
    let bytes = chunk;
    const room = limit - relayed;
    if (bytes.length >= room) {
      if (room <= 0) return reset();
      bytes = chunk.subarray(0, room);
    }
    if (!meter.add(bytes.length)) return stop();
    relayed += bytes.length;
    if (relayed >= limit) {
      to.write(bytes, reset);
      return;
    }
    if (!to.write(bytes)) from.pause();
  };

  const fromClient = (chunk: Buffer): void => forward(chunk, client, target);
  const rewrite = options.fromTarget;
  const fromTarget =
    rewrite === undefined
      ? (chunk: Buffer): void => forward(chunk, target, client)
      : (chunk: Buffer): void => {
          const bytes = rewrite(chunk);
          if (bytes.length > 0) forward(bytes, target, client);
        };
  client.on('data', fromClient);
  target.on('data', fromTarget);
  client.on('drain', () => target.resume());
  target.on('drain', () => client.resume());
  client.on('end', () => target.end());
  target.on('end', () => client.end());
  client.on('error', stop);
  target.on('error', stop);
  // One side gone for good (not a half close): the other cannot be answered any more.
  client.on('close', () => target.end());
  target.on('close', () => client.end());

  if (options.initial && options.initial.length > 0) forward(options.initial, client, target);
  if (limit <= 0) reset();
  else {
    client.resume();
    target.resume();
  }
}
