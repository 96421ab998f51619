// The order component's public face: the facade (src/orders/facade.ts) and the parts and shapes callers use.
export { Catalog, isPurchasable, isDynamic, ALL_PROXY_TYPES, STATIC_PROXY_TYPES, DYNAMIC_PROXY_TYPES } from './catalog.ts';
export { OrderError, type OrderErrorCode } from './errors.ts';
export { Placer, PLACING_OPERATIONS } from './placer.ts';
export type {
  OpenInput,
  AssignIpInput,
  RenewInput,
  ReleaseInput,
  AfterSaleInput,
  ChangeInput,
  ResetInput,
  ResetOutcome,
  ResumeReport,
  PlacingOperation,
} from './placer.ts';
export { Tracker, orderLeaseName, type TrackerSettings } from './tracker.ts';
export { CallbackHandler, CALLBACK_TYPES, type CallbackAnswer } from './callbacks.ts';
export { realClock, type OrdersClock } from './clock.ts';
export { newMerchantNo } from './numbers.ts';
export * from './types.ts';
export { Orders, nodeOf, type OpenBody, type OrdersOptions } from './facade.ts';
