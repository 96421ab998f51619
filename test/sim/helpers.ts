// Shared by the sandbox's tests: a raw envelope caller (for what the real client refuses to send), the real
// client, a loopback callback listener and polling.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AesEnvelope } from '../../src/platform/envelope.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { PlatformError } from '../../src/platform/errors.ts';
import { operations, type OperationName } from '../../src/platform/operations.ts';
import type { Simulator } from '../../src/sim/index.ts';

export interface RawReply {
  reqId?: string;
  code: number;
  msg: string;
  data?: string;
  /** decrypted data, when present */
  value?: unknown;
}

export async function rawCall(
  sim: Pick<Simulator, 'baseUrl' | 'appKey' | 'appSecret'>,
  name: OperationName,
  params: unknown,
  envelope: Partial<{ version: string; encrypt: string; appKey: string; reqId: string | undefined; secret: string; params: string }> = {},
): Promise<RawReply> {
  const aes = new AesEnvelope(envelope.secret ?? sim.appSecret);
  const body: Record<string, unknown> = {
    version: envelope.version ?? 'v2',
    encrypt: envelope.encrypt ?? 'aes',
    appKey: envelope.appKey ?? sim.appKey,
    params: envelope.params ?? aes.encryptJson(params),
  };
  if (!('reqId' in envelope)) body.reqId = `r${Math.random().toString(36).slice(2)}`;
  else if (envelope.reqId !== undefined) body.reqId = envelope.reqId;
  const res = await fetch(sim.baseUrl + operations[name].path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const reply = (await res.json()) as RawReply;
  if (reply.data) reply.value = new AesEnvelope(sim.appSecret).decryptJson(reply.data);
  return reply;
}

export function clientFor(sim: Pick<Simulator, 'baseUrl' | 'appKey' | 'appSecret'>, retries = 0): PlatformClient {
  return new PlatformClient({
    baseUrl: sim.baseUrl,
    appKey: sim.appKey,
    appSecret: sim.appSecret,
    retries,
    backoff: { baseMs: 10, maxMs: 20 },
    timeoutMs: 3000,
  });
}

/** The platform code of a failed call (throws if the call succeeded). */
export async function codeOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (err) {
    if (err instanceof PlatformError) return err.platformCode;
    throw err;
  }
  throw new Error('expected a platform error');
}

export { waitFor } from '../support/wait.ts';

export interface CallbackListener {
  url: string;
  received: { type: string; no: string; op: string }[];
  /** per callback type: how many of the next callbacks of that type to answer with a non-success code */
  failures: Record<string, number>;
  close(): Promise<void>;
}

export async function callbackListener(): Promise<CallbackListener> {
  const listener: CallbackListener = { url: '', received: [], failures: {}, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    listener.received.push({
      type: u.searchParams.get('type') ?? '',
      no: u.searchParams.get('no') ?? '',
      op: u.searchParams.get('op') ?? '',
    });
    const type = u.searchParams.get('type') ?? '';
    const failing = (listener.failures[type] ?? 0) > 0;
    if (failing) listener.failures[type]! -= 1;
    const answer = failing ? 'fail' : 'success';
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(answer === 'success' ? { code: 'success', msg: 'ok' } : { code: 'retry', msg: 'busy' }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  listener.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`;
  listener.close = () =>
    new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  return listener;
}
