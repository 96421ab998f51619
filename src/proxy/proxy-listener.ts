// What every proxy listener (HTTP, SOCKS5) offers the daemon besides its protocol: listening on its address,
// the port it got, and how many client connections it holds (the pipeline's registry).
import type { Server } from 'node:net';
import { boundPort, listenOn } from './listen.ts';
import type { TunnelPipeline } from './tunnel.ts';

export abstract class ProxyListener {
  protected abstract readonly server: Server;
  protected abstract readonly pipeline: TunnelPipeline;

  constructor(
    /** Where it listens: 0 = any free port (read it from listen()'s result); host default 127.0.0.1. */
    private readonly address: { port: number; host?: string | undefined },
  ) {}

  /** Starts listening; resolves with the bound address. */
  listen(): Promise<{ host: string; port: number }> {
    return listenOn(this.server, this.address.port, this.address.host);
  }

  get port(): number {
    return boundPort(this.server);
  }

  /** Client connections open now. */
  get connections(): number {
    return this.pipeline.conns.openSockets;
  }
}
