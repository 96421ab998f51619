// What a listening server does with an 'error' event, for every server Rotor runs (proxy listeners, admin,
// callback). Once listening, such an error is a failed accept (EMFILE, ENFILE, ENOBUFS: all servers share the
// process's descriptors) and the server goes on accepting, so it is logged; with no listener at all it would
// take the process down. Before listening, listen()'s own handler (or fastify's) rejects, so nothing is said.
// Imports nothing of Rotor's (the logger is structural), so every component may use it.
import type { EventEmitter } from 'node:events';

export interface AcceptLogger {
  warn(obj: object, msg: string): void;
}

/** Logs one server 'error' if it is a failed accept (the server is listening). */
export function reportFailedAccept(listening: boolean, err: Error, what: string, logger: AcceptLogger | undefined): void {
  if (listening) logger?.warn({ err }, `${what} could not accept a connection`);
}

/** Installs the one 'error' listener a server needs for failed accepts. */
export function logFailedAccepts(
  server: EventEmitter & { readonly listening: boolean },
  what: string,
  logger: AcceptLogger | undefined,
): void {
  server.on('error', (err: Error) => reportFailedAccept(server.listening, err, what, logger));
}
