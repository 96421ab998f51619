// One CONNECT through the HTTP proxy listener on a fresh connection, with Basic credentials: the answer's head
// as the proxy wrote it (status line, Proxy-Status and all), for tests that judge refusals by their words.
import { connect } from 'node:net';

/** The head of the answer to `CONNECT 127.0.0.1:<targetPort>` sent to the proxy at `proxyPort` as `user`. */
export function connectHead(proxyPort: number, targetPort: number, user: string, pass: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: proxyPort });
    let t = '';
    s.on('data', (d: Buffer) => {
      t += d.toString('latin1');
      if (t.includes('\r\n\r\n')) s.destroy();
    });
    s.on('error', reject);
    s.on('close', () => resolve(t));
    const auth = Buffer.from(`${user}:${pass}`).toString('base64');
    s.write(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
  });
}

/** The status of that answer (0 when the proxy closed without one). */
export async function connectStatus(proxyPort: number, targetPort: number, user: string, pass: string): Promise<number> {
  const head = await connectHead(proxyPort, targetPort, user, pass);
  return Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
}
