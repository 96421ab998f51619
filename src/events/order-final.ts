// `order.final`: the order tracker calls this when an order is first seen in a final status (3 succeeded,
// 4 failed, 5 partial), before that status is stored; the marker `order.final:<appOrderNo>` keeps it single
// when a crash makes the tracker see it again, or when two daemons of a fleet both read it.
import type { OrderRecord } from '../store/types.ts';
import type { EventSink } from './types.ts';

export function orderFinalEmitter(events: EventSink): (order: OrderRecord) => Promise<void> {
  return async (order) => {
    await events.emit(
      'order.final',
      { orderNo: order.orderNo, appOrderNo: order.appOrderNo, type: order.type, status: order.status, amount: order.amount, count: order.count },
      { marker: `order.final:${order.appOrderNo}` },
    );
  };
}
