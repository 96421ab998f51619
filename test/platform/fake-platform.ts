// A small loopback platform for the client's tests: speaks the seed's envelope with AesEnvelope, records every
// request it receives, and can be told to answer a given code, drop the reply, delay, or send garbage.
// Not the simulator: it holds no state beyond what a test scripts into it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AesEnvelope } from '../../src/platform/envelope.ts';
import { operationByPath, type OperationName } from '../../src/platform/operations.ts';

export interface Received {
  path: string;
  operation: OperationName | undefined;
  /** The raw envelope as posted. */
  envelope: Record<string, unknown>;
  reqId: string;
  /** The decrypted params (undefined when they did not decrypt). */
  params: unknown;
  /** The raw request body, to compare ciphertexts across retries. */
  body: string;
  /** The HTTP method (a GET carries the envelope in its query string). */
  method: string;
}

export type Behaviour =
  /** Answer with this code; `data` is encrypted unless `rawData` is given; omit both for no data. */
  | { kind: 'reply'; code: number; msg?: string; data?: unknown; rawData?: unknown; httpStatus?: number }
  /** Read the request, count it, then destroy the socket without answering. */
  | { kind: 'drop' }
  /** Wait, then behave as `then` (default: the responder's answer). */
  | { kind: 'delay'; ms: number; then?: Behaviour }
  /** Answer an arbitrary HTTP status and body (not an envelope unless the body is one). */
  | { kind: 'http'; status: number; body: string; contentType?: string }
  /** Send half a reply with a large content-length, then destroy the socket. */
  | { kind: 'truncate' };

export type Responder = (operation: OperationName | undefined, params: unknown) => unknown;
/** Picks a behaviour from the request itself (for concurrent clients, where a queue's order is unknown). */
export type Router = (operation: OperationName | undefined, params: unknown) => Behaviour | undefined;

export class FakePlatform {
  readonly appKey: string;
  readonly appSecret: string;
  readonly received: Received[] = [];
  private readonly envelope: AesEnvelope;
  private readonly server: http.Server;
  private readonly script: Behaviour[] = [];
  private readonly sockets = new Set<import('node:net').Socket>();
  responder: Responder;
  router: Router | undefined;
  baseUrl = '';

  constructor(options: { appKey?: string; appSecret?: string; responder?: Responder } = {}) {
    this.appKey = options.appKey ?? 'test-app-key';
    this.appSecret = options.appSecret ?? 'qwertyuiop123456';
    this.envelope = new AesEnvelope(this.appSecret);
    this.responder = options.responder ?? (() => ({}));
    this.server = http.createServer((req, res) => void this.handle(req, res));
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    this.baseUrl = `http://127.0.0.1:${port}`;
    return this;
  }

  /** The next requests get these behaviours, in order; then the responder answers again. */
  enqueue(...behaviours: Behaviour[]): void {
    this.script.push(...behaviours);
  }

  reset(): void {
    this.received.length = 0;
    this.script.length = 0;
    this.router = undefined;
  }

  /** Encrypts text like the platform does, for tests that craft replies. */
  encrypt(plaintext: string): string {
    return this.envelope.encrypt(plaintext);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const path = (req.url ?? '').split('?')[0] ?? '';
    const operation = operationByPath(path);
    const method = req.method ?? 'GET';
    let envelope: Record<string, unknown> = {};
    try {
      envelope =
        method === 'GET'
          ? Object.fromEntries(new URL(req.url ?? '/', 'http://fake').searchParams)
          : (JSON.parse(body) as Record<string, unknown>);
    } catch {
      // recorded as an empty envelope
    }
    let params: unknown;
    try {
      params = typeof envelope.params === 'string' ? this.envelope.decryptJson(envelope.params) : undefined;
    } catch {
      params = undefined;
    }
    const reqId = typeof envelope.reqId === 'string' ? envelope.reqId : '';
    this.received.push({ path, operation, envelope, reqId, params, body, method });

    let behaviour = this.script.shift() ?? this.router?.(operation, params);
    while (behaviour?.kind === 'delay') {
      await new Promise((r) => setTimeout(r, (behaviour as { ms: number }).ms));
      behaviour = behaviour.then;
    }
    if (behaviour === undefined) {
      if (envelope.appKey !== this.appKey || params === undefined) behaviour = { kind: 'reply', code: 10001, msg: 'decrypt failed' };
      else behaviour = { kind: 'reply', code: 200, msg: 'success', data: this.responder(operation, params) };
    }
    if (res.destroyed) return;
    switch (behaviour.kind) {
      case 'drop':
        req.socket.destroy();
        return;
      case 'truncate':
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"reqId":"');
        setImmediate(() => req.socket.destroy());
        return;
      case 'http':
        res.writeHead(behaviour.status, { 'content-type': behaviour.contentType ?? 'text/html' });
        res.end(behaviour.body);
        return;
      case 'reply': {
        const reply: Record<string, unknown> = {
          reqId,
          code: behaviour.code,
          msg: behaviour.msg ?? (behaviour.code === 200 ? 'success' : 'error'),
        };
        if (behaviour.rawData !== undefined) reply.data = behaviour.rawData;
        else if (behaviour.data !== undefined) reply.data = this.envelope.encryptJson(behaviour.data);
        res.writeHead(behaviour.httpStatus ?? 200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(reply));
        return;
      }
    }
  }
}
