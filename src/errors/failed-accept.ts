// What a listening server does with an 'error' event, for every server Rotor runs (proxy listeners, admin,
// callback), and the process-wide word that descriptors ran out. Once listening, such an error is a failed
// accept (EMFILE, ENFILE, ENOBUFS: all servers share the process's descriptors) and the server goes on
// accepting; with no listener at all it would take the process down. Before listening, listen()'s own handler
// (or fastify's) rejects, so nothing is said. Running out of descriptors (EMFILE: this process's limit, ENFILE:
// the system's) is the process's own state, not a fault of a peer: whoever meets it reports it here once per
// failed operation, and whoever runs the episode (src/proxy/accept-guard.ts) listens.
// Imports nothing of Rotor's but the error base (the logger is structural), so every component may use it.
import type { EventEmitter } from 'node:events';
import { RotorError } from './rotor-error.ts';

export interface AcceptLogger {
  warn(obj: object, msg: string): void;
}

/** Where descriptors ran out: accepting a client, or dialing an upstream. */
export type ExhaustionSite = 'accept' | 'dial';

type ExhaustionListener = (where: ExhaustionSite, err: NodeJS.ErrnoException | undefined) => void;
const exhaustionListeners = new Set<ExhaustionListener>();

/** Whether `err` says the process (EMFILE) or the system (ENFILE) has no descriptor left. */
export function isDescriptorExhaustion(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null | undefined)?.code;
  return code === 'EMFILE' || code === 'ENFILE';
}

/** Subscribes to every report of exhausted descriptors in this process; returns the unsubscribe. */
export function onDescriptorExhaustion(listener: ExhaustionListener): () => void {
  exhaustionListeners.add(listener);
  return () => exhaustionListeners.delete(listener);
}

/** Reports one operation that failed for want of a descriptor; false when nobody listens. */
export function reportDescriptorExhaustion(where: ExhaustionSite, err?: NodeJS.ErrnoException): boolean {
  for (const l of exhaustionListeners) l(where, err);
  return exhaustionListeners.size > 0;
}

/**
 * An upstream dial that could not open its socket because this process (or the system) is out of descriptors:
 * a local refusal (503, SOCKS5 0x01 general failure), never the upstream's failure: no node cools for it.
 */
export class DescriptorsExhaustedError extends RotorError {
  constructor(cause?: NodeJS.ErrnoException) {
    super('DESCRIPTORS_EXHAUSTED', 'the proxy is out of file descriptors; try again shortly', {
      httpStatus: 503,
      socksReply: 0x01,
      ...(cause ? { cause } : {}),
    });
  }
}

/**
 * Logs one server 'error' if it is a failed accept (the server is listening). Exhausted descriptors are
 * reported instead (the episode says so once, not once per attempt) unless nobody runs an episode.
 */
export function reportFailedAccept(listening: boolean, err: Error, what: string, logger: AcceptLogger | undefined): void {
  if (!listening) return;
  if (isDescriptorExhaustion(err) && reportDescriptorExhaustion('accept', err)) return;
  logger?.warn({ err }, `${what} could not accept a connection`);
}

/** Installs the one 'error' listener a server needs for failed accepts. */
export function logFailedAccepts(
  server: EventEmitter & { readonly listening: boolean },
  what: string,
  logger: AcceptLogger | undefined,
): void {
  server.on('error', (err: Error) => reportFailedAccept(server.listening, err, what, logger));
}
