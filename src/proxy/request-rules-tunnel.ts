// A tunnel's time to first byte under a request rule's timeoutMs (src/proxy/request-rules.ts). The upstream
// is judged only once the client has spoken: a tunnel whose client says nothing (an idle preconnect, a
// protocol where the client waits) owes no byte. One timer per watched tunnel, re-armed with refresh(); no
// listener on the data path: the socket's byte counters are read when the timer fires.
//   - At the first check (timeoutMs after the tunnel opened): nothing read and the client has written → fire.
//   - Nothing written yet: checked again every timeoutMs; a check that first sees the client's bytes waits one
//     more timeoutMs, so the upstream always gets at least timeoutMs after the client spoke.
//   - Any byte read, or the socket closed: the watch ends.
import type { Socket } from 'node:net';

export function watchTunnelFirstByte(socket: Socket, timeoutMs: number, fire: () => void): void {
  const read = socket.bytesRead;
  const written = socket.bytesWritten;
  let first = true;
  let spoke = false;
  const timer = setTimeout(() => {
    if (socket.destroyed || socket.bytesRead !== read) return;
    if (socket.bytesWritten !== written && (first || spoke)) {
      fire();
      return;
    }
    if (socket.bytesWritten !== written) spoke = true;
    first = false;
    timer.refresh();
  }, timeoutMs);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}
