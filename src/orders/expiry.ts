// The expiry watch: running static instances close to their end are warned about once per expiry, and, when
// auto-renew is enabled, renewed `hoursBefore` the end, once per expiry (a renewal the platform refused, or
// accepted but whose order then failed, is tried again at the next check). The tracker runs it on its timer;
// it reads only the store (instances as last read from the platform) and places renewals through the placer.
import type { Logger } from '../telemetry/logger.ts';
import type { InstanceRecord, InstanceStore, OrderJournal, OrderStore } from '../store/types.ts';
import type { OrdersClock } from './clock.ts';
import { derivedMerchantNo } from './numbers.ts';
import type { Placer } from './placer.ts';
import { INSTANCE_STATUS, ORDER_STATUS } from './types.ts';

/** Local auto-renew: off unless `enabled`. Renews `cycleTimes` periods `hoursBefore` expiry, once per expiry (refusals and failed orders retried). */
export interface AutoRenewSettings {
  enabled: boolean;
  hoursBefore: number;
  cycleTimes?: number;
}

/**
 * Renewals of one expiry the platform may refuse (or accept and then fail) before the watch stops trying (one per check, every
 * expiryCheckMs: 48 is eight hours at the default ten minutes, enough to outlast a short balance and still
 * bounded in journal entries and platform calls).
 */
export const MAX_RENEW_ATTEMPTS = 48;

export interface ExpiryWatchOptions {
  store: InstanceStore & OrderJournal & Pick<OrderStore, 'getOrder'>;
  placer: Pick<Placer, 'renew'>;
  clock: Pick<OrdersClock, 'now'>;
  /** Warn when a running instance expires within this many hours. */
  warnHours: number;
  autoRenew?: AutoRenewSettings | undefined;
  logger?: Logger | undefined;
}

export class ExpiryWatch {
  /** `instanceNo:userExpired` already warned about (a renewal moves the expiry, and warns again). */
  private readonly warned = new Set<string>();
  /** `instanceNo:userExpired` whose renewals were all refused (said once). */
  private readonly gaveUp = new Set<string>();

  constructor(private readonly o: ExpiryWatchOptions) {}

  /** Warns about running instances close to expiry and, when enabled, renews them once per expiry. */
  async check(): Promise<void> {
    const { store, placer, logger, warnHours } = this.o;
    const nowSec = Math.floor(this.o.clock.now() / 1000);
    const renew = this.o.autoRenew?.enabled ? this.o.autoRenew : undefined;
    const horizon = Math.max(warnHours, renew?.hoursBefore ?? 0) * 3600;
    const soon = await store.listInstances({ statuses: [INSTANCE_STATUS.running], expiresBefore: nowSec + horizon });
    forgetPast(this.warned, nowSec);
    forgetPast(this.gaveUp, nowSec);
    for (const inst of soon) {
      const expires = inst.userExpired ?? 0;
      // A dynamic order's instance has no expiry: the platform leaves userExpired 0 (or absent), or may date
      // the package; either way it is no static instance to warn about or renew.
      if (expires <= 0 || isDynamicInstance(inst)) continue;
      const left = expires - nowSec;
      const mark = `${inst.instanceNo}:${expires}`;
      if (left <= warnHours * 3600 && !this.warned.has(mark)) {
        this.warned.add(mark);
        logger?.warn(
          { instanceNo: inst.instanceNo, userExpired: expires, hoursLeft: Math.round((left / 3600) * 10) / 10 },
          left > 0 ? 'static instance expires soon' : 'static instance has expired',
        );
      }
      if (renew && left > 0 && left <= renew.hoursBefore * 3600) {
        const appOrderNo = await this.renewalNumber(mark, inst.instanceNo);
        if (appOrderNo === undefined) continue;
        try {
          await placer.renew({ appOrderNo, instances: [{ instanceNo: inst.instanceNo, cycleTimes: renew.cycleTimes ?? 1 }] });
          logger?.info({ instanceNo: inst.instanceNo, appOrderNo }, 'auto-renew placed');
        } catch (err) {
          logger?.warn({ instanceNo: inst.instanceNo, appOrderNo, err }, 'auto-renew failed; tried again at the next check');
        }
      }
    }
  }

  /**
   * The merchant number of this expiry's next renewal, or undefined when none is to be placed. Numbers are derived
   * from the expiry and the attempt, so a restart, a second sweep or a second daemon on the same store finds the
   * same ones journaled: one sent or unresolved renewal, or one accepted whose order is not known to have failed
   * (pending, processing, succeeded, partial, or not read yet), ends the search (nothing placed again); one the
   * platform refused (its balance short at that moment, the product briefly off sale) or accepted and then
   * failed (order status 4: nothing renewed, the line refunded) is followed by the next attempt, up to
   * MAX_RENEW_ATTEMPTS.
   */
  private async renewalNumber(mark: string, instanceNo: string): Promise<string | undefined> {
    let failed = 0;
    let previous: string | undefined;
    for (let attempt = 0; attempt < MAX_RENEW_ATTEMPTS; attempt++) {
      const appOrderNo = derivedMerchantNo('RA', attempt === 0 ? mark : `${mark}:${attempt}`);
      const entry = await this.o.store.getJournal(appOrderNo);
      if (entry === undefined) {
        if (previous !== undefined) {
          this.o.logger?.warn({ instanceNo, failedOrder: previous, appOrderNo }, 'auto-renew order failed; placing another');
        }
        return appOrderNo;
      }
      previous = undefined;
      if (entry.state === 'rejected') continue;
      if (entry.state !== 'accepted') return undefined;
      const order = await this.o.store.getOrder(appOrderNo);
      if (order?.status !== ORDER_STATUS.failed) return undefined;
      failed += 1;
      previous = appOrderNo;
    }
    if (!this.gaveUp.has(mark)) {
      this.gaveUp.add(mark);
      this.o.logger?.error(
        { instanceNo, attempts: MAX_RENEW_ATTEMPTS, failedOrders: failed },
        'auto-renew given up for this expiry: every renewal was refused or failed',
      );
    }
    return undefined;
  }
}

/** Drops `instanceNo:userExpired` marks of expiries a day past: the sets hold the instances near their end only. */
function forgetPast(marks: Set<string>, nowSec: number): void {
  for (const mark of marks) if (Number(mark.slice(mark.lastIndexOf(':') + 1)) < nowSec - 86_400) marks.delete(mark);
}

/** proxyType 104/105 in the platform's record (dynamic by traffic or by IP count). */
function isDynamicInstance(inst: InstanceRecord): boolean {
  const t = (inst.raw as { proxyType?: unknown } | null)?.proxyType;
  return t === 104 || t === 105 || t === '104' || t === '105';
}
