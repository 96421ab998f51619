// Shapes shared inside src/orders/ and with the admin routes.
import type { CallOptions } from '../platform/client.ts';
import type { OperationName, OpRequest, OpResponse } from '../platform/operations.ts';
import type { InstanceRecord, OrderRecord } from '../store/types.ts';

/** What the order surface needs of the platform client (PlatformClient satisfies it). */
export interface PlatformCaller {
  call<N extends OperationName>(name: N, params: OpRequest<N>, options?: CallOptions): Promise<OpResponse<N>>;
}

// Order statuses are the platform's vocabulary, defined once in src/platform/order-status.ts.
export { FINAL_ORDER_STATUS, ORDER_STATUS } from '../platform/order-status.ts';
export const INSTANCE_STATUS = { toCreate: 1, creating: 2, running: 3, stopped: 6, closed: 10, released: 11 } as const;
export const ORDER_TYPE = { open: 1, renew: 2, release: 3, change: 5 } as const;

/** Named leases with expiry, kept renewed while held: how a fleet shares out orders (src/fleet/lease.ts LeaseKeeper implements it). */
export interface OrderClaims {
  acquire(name: string): Promise<boolean>;
  isHeld(name: string): boolean;
  release(name: string): Promise<void>;
}

/** An instance as the admin API shows it: no password unless asked for. */
export type InstanceView = Omit<InstanceRecord, 'pwd' | 'raw'> & { pwd?: string | null };

export interface OrderView {
  orderNo: string | null;
  appOrderNo: string;
  type: number;
  status: number;
  amount: string | null;
  count: number | null;
  createdAt: number;
  updatedAt: number;
  instances?: InstanceView[];
}

export function instanceView(i: InstanceRecord, reveal = false): InstanceView {
  const v: InstanceView = {
    instanceNo: i.instanceNo,
    orderNo: i.orderNo,
    productNo: i.productNo,
    status: i.status,
    ip: i.ip,
    port: i.port,
    username: i.username,
    protocol: i.protocol,
    userExpired: i.userExpired,
    updatedAt: i.updatedAt,
  };
  if (reveal) v.pwd = i.pwd;
  return v;
}

export function orderView(o: OrderRecord, instances?: InstanceRecord[]): OrderView {
  const v: OrderView = {
    orderNo: o.orderNo,
    appOrderNo: o.appOrderNo,
    type: o.type,
    status: o.status,
    amount: o.amount,
    count: o.count,
    createdAt: o.createdAt,
    updatedAt: o.updatedAt,
  };
  if (instances) v.instances = instances.map((i) => instanceView(i));
  return v;
}
