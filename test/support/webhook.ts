// A webhook receiver for the events tests: a real HTTP server on loopback that records every POST (raw body,
// signature header, the status it answered) and answers with the status the test sets (500 to make Rotor
// retry, 200 to accept).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  body: string;
  signature: string | undefined;
  /** the status this receiver answered */
  status: number;
}

export interface WebhookReceiver {
  url: string;
  /** status answered from now on */
  answer: number;
  readonly deliveries: Delivery[];
  /** the parsed bodies of the POSTs answered 2xx */
  accepted(): Array<{ id: number; type: string; time: string; data: Record<string, unknown> }>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(answer = 200): Promise<WebhookReceiver> {
  const deliveries: Delivery[] = [];
  const receiver = { answer } as { answer: number };
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const status = receiver.answer;
      deliveries.push({
        body: Buffer.concat(parts).toString('utf8'),
        signature: req.headers['x-rotor-signature'] as string | undefined,
        status,
      });
      res.statusCode = status;
      res.end(status < 300 ? 'ok' : 'not now');
    });
  });
  const port = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as AddressInfo).port)));
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    accepted: () =>
      deliveries
        .filter((d) => d.status < 300)
        .map((d) => JSON.parse(d.body) as { id: number; type: string; time: string; data: Record<string, unknown> }),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  });
}
