export * from './types.ts';
export { Events, type EventsOptions } from './outbox.ts';
export { WebhookDelivery, type WebhookOptions, type WebhookSettings } from './webhook.ts';
export { WebhookSwitch, webhookSettings, type WebhookConfig } from './webhook-switch.ts';
export { QuotaWatcher, quotaMarker, type QuotaReading, type QuotaSource, type QuotaWatcherOptions } from './quota-watcher.ts';
export { ExpiryWatcher, type ExpiryReading, type ExpiryWatcherOptions } from './expiry-watcher.ts';
export { balanceLowListener, type BalanceReading } from './balance-low.ts';
export { orderFinalEmitter, orderFinalWriter } from './order-final.ts';
export { signBody, verifySignature, SIGNATURE_HEADER } from './signature.ts';
