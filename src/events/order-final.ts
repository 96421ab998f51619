// `order.final`: written when an order is first seen in a final status (3 succeeded, 4 failed, 5 partial) by
// the tracker, or is final in the platform's answer to its placement. orderFinalWriter stores the order and
// the event in one store transaction (a crash keeps both or neither: the order is then read again, final,
// and announced then); the marker `order.final:<appOrderNo>` keeps it single when two daemons of a fleet
// both read it. orderFinalEmitter only writes the event (for callers that store the order themselves).
import type { OrderRecord, OrderStore } from '../store/types.ts';
import type { Events } from './outbox.ts';
import type { EventSink } from './types.ts';

function finalData(order: OrderRecord): Record<string, unknown> {
  return {
    orderNo: order.orderNo,
    appOrderNo: order.appOrderNo,
    type: order.type,
    status: order.status,
    amount: order.amount,
    count: order.count,
  };
}

/** Stores a just-final order together with its order.final event (the orders' storeFinal hook). */
export function orderFinalWriter(events: Events, store: Pick<OrderStore, 'putOrderWithEvent'>): (order: OrderRecord) => Promise<void> {
  return async (order) => {
    await events.emitWith('order.final', finalData(order), { marker: `order.final:${order.appOrderNo}` }, (event) =>
      store.putOrderWithEvent(order, event),
    );
  };
}

export function orderFinalEmitter(events: EventSink): (order: OrderRecord) => Promise<void> {
  return async (order) => {
    await events.emit('order.final', finalData(order), { marker: `order.final:${order.appOrderNo}` });
  };
}
