// The admin, callback and portal listeners share one descriptor budget (src/errors/descriptor-budget.ts), and each
// keeps a reserve past it: clients of one listener holding requests in flight (a portal's POST heads whose bodies
// never come) fill the budget, yet the operator's request on another listener is answered (review18 #5: it was
// reset), while the busy listener's own newcomer is refused. Two real node:http servers bounded by boundListener
// on one budget of 4 with a reserve of 2; real sockets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { boundListener, ADMIN_LIMITS } from '../../src/admin/http-limits.ts';
import { DescriptorBudget } from '../../src/errors/descriptor-budget.ts';

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

/** A POST head whose body never comes: the request stays in flight. */
function busy(port: number): Promise<Socket> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => {
      s.write('POST /sign-in HTTP/1.1\r\nHost: portal\r\nContent-Length: 100\r\n\r\n');
      resolve(s);
    });
    s.on('error', () => undefined);
  });
}

test("a listener's busy clients fill the budget: another listener's request is still answered; the busy one's newcomer is refused", async (t) => {
  const budget = new DescriptorBudget({ limit: () => 32, floor: 4, reserve: 2 });
  let inFlight = 0;
  const portal = createServer((req) => {
    inFlight++;
    req.on('data', () => undefined);
  });
  const admin = createServer((_req, res) => res.end('ok'));
  boundListener(portal, ADMIN_LIMITS, budget);
  boundListener(admin, ADMIN_LIMITS, budget);
  const portalPort = await listen(portal);
  const adminPort = await listen(admin);
  const held: Socket[] = [];
  t.after(async () => {
    for (const s of held) s.destroy();
    portal.closeAllConnections();
    admin.closeAllConnections();
    await new Promise((r) => portal.close(r));
    await new Promise((r) => admin.close(r));
  });
  for (let i = 0; i < 4; i++) held.push(await busy(portalPort));
  const deadline = Date.now() + 10_000;
  while (inFlight < 4) {
    assert.ok(Date.now() < deadline, 'the four POSTs in flight');
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(budget.max, 4);
  assert.equal(budget.inUse, 4, 'the budget is full of busy connections');

  const refusedBefore = budget.refused;
  const fifth = connect(portalPort, '127.0.0.1');
  fifth.on('error', () => undefined);
  const closed = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 10_000);
    fifth.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  held.push(fifth);
  assert.ok(closed, "the busy listener's newcomer is closed");
  assert.equal(budget.refused, refusedBefore + 1, "the busy listener's newcomer is refused");

  const answer = await fetch(`http://127.0.0.1:${adminPort}/`, { signal: AbortSignal.timeout(10_000) }).catch(
    (err: unknown) => err as Error,
  );
  assert.ok(!(answer instanceof Error), `the operator's request: ${String(answer)}`);
  assert.equal(await answer.text(), 'ok');
});
