// A SOCKS5 client for tests: the sans-I/O client of src/wire/socks5-client.ts driven on a connected socket, with
// a callback. `done` gets the bytes behind the reply (socket paused, listeners gone) or the typed error
// (listeners gone; the caller destroys the socket). Returns what detaches without calling `done`.
import type { Socket } from 'node:net';
import {
  DONE,
  FAILED,
  socks5Connect as connectClient,
  type Socks5ClientError,
  type Socks5Credentials,
} from '../../src/wire/socks5-client.ts';

export function socks5Connect(
  socket: Socket,
  target: { host: string; port: number },
  credentials: Socks5Credentials | undefined,
  done: (err: Socks5ClientError | null, head: Buffer | null, bound?: string) => void,
): () => void {
  const client = connectClient(target, credentials);
  const first = client.start();
  if (first === null) {
    done(client.error, null);
    return () => {};
  }
  const detach = (): void => {
    socket.off('data', onData);
    socket.off('end', onEnd);
    socket.off('close', onEnd);
    socket.off('error', onError);
  };
  const settle = (step: number): void => {
    if (client.out !== null) socket.write(client.out);
    if (step === DONE) {
      detach();
      socket.pause();
      done(null, client.head, client.bound);
    } else if (step === FAILED) {
      detach();
      done(client.error, null);
    }
  };
  const onData = (chunk: Buffer): void => settle(client.feed(chunk));
  const onEnd = (): void => settle(client.closed());
  const onError = (err: NodeJS.ErrnoException): void => settle(client.closed(err));
  socket.on('data', onData);
  socket.on('end', onEnd);
  socket.on('close', onEnd);
  socket.on('error', onError);
  socket.write(first);
  return detach;
}
