// What every handler of the sandbox platform shares.
import type { z } from 'zod';
import type { operations, OperationName } from '../../platform/operations.ts';
import type { Upstreams } from '../contracts.ts';
import type { CallbackSender } from './callbacks.ts';
import type { SimClock } from './clock.ts';
import type { Faults } from './faults.ts';
import type { SimState } from './state.ts';

export interface SimContext {
  state: SimState;
  clock: SimClock;
  callbacks: CallbackSender;
  faults: Faults;
  upstreams: Upstreams | null;
  /** platform time from acceptance to the final state of an order */
  orderDelayMs: number;
  /** base URL of the sandbox's own HTTP server (extraction links point here) */
  baseUrl(): string;
  /** Per productNo: proxy strings DrawByPwd hands out instead of the sandbox's own gateways (SimOptions.drawnLines). */
  drawnLines?: ReadonlyMap<string, readonly string[]>;
  /** Round-robin position per product in drawnLines. */
  drawnNext?: Map<string, number>;
  /** Calls received per operation on the seed's paths (counted on arrival, before faults apply). */
  calls: Map<string, number>;
}

/** A request after validation by the operation table's schema. */
export type In<N extends OperationName> = z.output<(typeof operations)[N]['request']>;

export type Handler<N extends OperationName> = (ctx: SimContext, params: In<N>) => unknown;
