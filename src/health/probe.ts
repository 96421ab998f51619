// One health probe of one upstream node, over the same dialers client connections use: TCP connect and the
// tunnel handshake to a target, then, when pool.healthCheck.url is set, a small GET through the tunnel.
// The target is the URL's host and port, else the last target a client reached (any target proves the node
// answers); with neither, the probe is the TCP connect alone. An upstream that answers the handshake but
// cannot reach the target (SOCKS5 host unreachable, HTTP 502/504) has answered: that passes, since the
// node is alive; a stall, a refusal, a reset or refused credentials fail.
import { connect as tlsConnect } from 'node:tls';
import type { Socket } from 'node:net';
import type { FailureReason, UpstreamNode } from '../pool/types.ts';
import type { DialOptions, Tunnel } from '../proxy/dial-http.ts';
import { connectTcp } from '../proxy/dial-tcp.ts';
import { UpstreamDialError } from '../proxy/errors.ts';
import type { Target } from '../proxy/types.ts';

export type ProbeResult = { ok: true; latencyMs: number } | { ok: false; latencyMs: number; reason: FailureReason; message: string };

export type ProbeDialer = (node: UpstreamNode, target: Target, options: DialOptions) => Promise<Tunnel>;

export interface ProbeOptions {
  dial: ProbeDialer;
  connectTimeoutMs: number;
  handshakeTimeoutMs: number;
  /** pool.healthCheck.url, parsed; undefined = connect + handshake only */
  url?: URL;
  /** A target recently reached through some node (used when no URL is set). */
  fallbackTarget?: () => Target | undefined;
}

function urlTarget(url: URL): Target {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return { host, port: url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80 };
}

/** Writes a GET for `url` on `socket` and resolves with the status code of the answer. */
function getStatus(socket: Socket, url: URL, head: Buffer | null, timeoutMs: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    let stream: Socket = socket;
    let buffer = head ? head.toString('latin1') : '';
    const timer = setTimeout(
      () => finish(new UpstreamDialError('stalled', `no answer to the health-check request within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const finish = (err: Error | null, status?: number): void => {
      clearTimeout(timer);
      stream.removeAllListeners('data');
      stream.destroy();
      socket.destroy();
      if (err) reject(err);
      else resolve(status!);
    };
    const onData = (chunk: Buffer): void => {
      buffer += chunk.toString('latin1');
      const eol = buffer.indexOf('\r\n');
      if (eol < 0) {
        if (buffer.length > 4096) finish(new UpstreamDialError('handshake', 'health-check answer is not HTTP'));
        return;
      }
      const m = /^HTTP\/\d(?:\.\d)? (\d{3})/.exec(buffer.slice(0, eol));
      if (!m) finish(new UpstreamDialError('handshake', 'health-check answer is not HTTP'));
      else finish(null, Number(m[1]));
    };
    const onEnd = (): void => finish(new UpstreamDialError('reset', 'the connection closed before the health-check answer'));
    const request = `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nUser-Agent: rotor-health\r\nConnection: close\r\n\r\n`;
    if (url.protocol === 'https:') {
      buffer = '';
      stream = tlsConnect({ socket, servername: url.hostname.startsWith('[') ? undefined : url.hostname }) as unknown as Socket;
      stream.once('secureConnect', () => stream.write(request));
    } else stream.write(request);
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('error', (err: NodeJS.ErrnoException) =>
      finish(new UpstreamDialError('reset', `health-check request failed: ${err.code ?? err.message}`)),
    );
    socket.resume();
  });
}

export async function probeNode(node: UpstreamNode, o: ProbeOptions): Promise<ProbeResult> {
  const started = performance.now();
  const elapsed = (): number => Math.round(performance.now() - started);
  const options: DialOptions = { connectTimeoutMs: o.connectTimeoutMs, handshakeTimeoutMs: o.handshakeTimeoutMs };
  try {
    const target = o.url ? urlTarget(o.url) : o.fallbackTarget?.();
    if (!target) {
      const socket = await connectTcp(node.host, node.port, o.connectTimeoutMs);
      socket.destroy();
      return { ok: true, latencyMs: elapsed() };
    }
    let tunnel: Tunnel;
    try {
      tunnel = await o.dial(node, target, options);
    } catch (err) {
      // The node answered; only the target was out of its reach.
      if (err instanceof UpstreamDialError && err.reason === 'target_refused') return { ok: true, latencyMs: elapsed() };
      throw err;
    }
    if (!o.url) {
      tunnel.socket.destroy();
      return { ok: true, latencyMs: elapsed() };
    }
    const status = await getStatus(tunnel.socket, o.url, tunnel.head, o.handshakeTimeoutMs);
    if (status >= 500) return { ok: false, latencyMs: elapsed(), reason: 'other', message: `health-check URL answered ${status}` };
    return { ok: true, latencyMs: elapsed() };
  } catch (err) {
    if (err instanceof UpstreamDialError) return { ok: false, latencyMs: elapsed(), reason: err.reason, message: err.message };
    return { ok: false, latencyMs: elapsed(), reason: 'other', message: err instanceof Error ? err.message : String(err) };
  }
}
