// The TCP leg of every upstream dial: connect with a deadline, cancellable by the client's DialSignal
// (cancel.ts), failures classified into the pool's FailureReason.
import { connect, type Socket } from 'node:net';
import { DescriptorsExhaustedError, isDescriptorExhaustion, reportDescriptorExhaustion } from '../errors/failed-accept.ts';
import type { FailureReason } from '../pool/types.ts';
import type { DialSignal } from './cancel.ts';
import { DialAbortedError, UpstreamDialError } from './errors.ts';
import { reserveSlots } from './socket-slots.ts';

/**
 * What a failed connect becomes. No descriptor left to open the socket with (EMFILE, ENFILE) is this
 * process's own exhaustion: reported (src/proxy/accept-guard.ts runs the episode) and a DescriptorsExhaustedError,
 * which no node is blamed for; anything else is the upstream's failure, classified for the pool.
 */
export function dialSocketError(err: NodeJS.ErrnoException, message: string): DescriptorsExhaustedError | UpstreamDialError {
  if (isDescriptorExhaustion(err)) {
    reportDescriptorExhaustion('dial', err);
    return new DescriptorsExhaustedError(err);
  }
  return new UpstreamDialError(classifySocketError(err), message);
}

export function classifySocketError(err: NodeJS.ErrnoException): FailureReason {
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'refused';
    case 'ECONNRESET':
    case 'EPIPE':
      return 'reset';
    case 'ETIMEDOUT':
      return 'connect_timeout';
    default:
      return 'other';
  }
}

/**
 * Runs `start` with a deadline and an abort signal. `start` gets the callbacks to settle with; on timeout or
 * abort, `onCancel` tears down whatever `start` opened.
 */
export function guardedDial<T>(
  timeoutMs: number,
  signal: DialSignal | undefined,
  timeoutMessage: string,
  start: (ok: (value: T) => void, fail: (err: Error) => void) => void,
  onCancel: () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const finish = (): void => {
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const ok = (value: T): void => {
      if (done) return;
      finish();
      resolve(value);
    };
    const fail = (err: Error): void => {
      if (done) return;
      finish();
      onCancel();
      reject(err);
    };
    const onAbort = (): void => fail(new DialAbortedError());
    const timer = setTimeout(() => fail(new UpstreamDialError('connect_timeout', timeoutMessage)), timeoutMs);
    if (signal?.aborted) {
      fail(new DialAbortedError());
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    start(ok, fail);
  });
}

/** Opens a TCP connection to host:port within timeoutMs. */
export function connectTcp(host: string, port: number, timeoutMs: number, signal?: DialSignal): Promise<Socket> {
  let socket: Socket | undefined;
  return guardedDial<Socket>(
    timeoutMs,
    signal,
    `upstream ${host}:${port} did not accept within ${timeoutMs} ms`,
    (ok, fail) => {
      // noDelay as an option: setNoDelay() right after connect() costs a second setsockopt once connected.
      const s = connect({ host, port, allowHalfOpen: true, noDelay: true });
      reserveSlots(s);
      socket = s;
      const onError = (err: NodeJS.ErrnoException): void => {
        fail(dialSocketError(err, `upstream ${host}:${port}: ${err.code ?? err.message}`));
      };
      s.once('error', onError);
      s.once('connect', () => {
        s.off('error', onError);
        // Between phases (and between the dial and the relay) nobody else listens; an error then must not
        // crash the process. The owner of each phase attaches its own handler and acts on errors.
        s.on('error', noop);
        ok(s);
      });
    },
    () => {
      socket?.destroy();
    },
  );
}

function noop(): void {}
