// The expiry watch: running static instances close to their end are warned about once per expiry, and, when
// auto-renew is enabled, renewed `hoursBefore` the end, once per expiry. The tracker runs it on its timer;
// it reads only the store (instances as last read from the platform) and places renewals through the placer.
import type { Logger } from '../telemetry/logger.ts';
import type { InstanceRecord, InstanceStore, OrderJournal } from '../store/types.ts';
import type { OrdersClock } from './clock.ts';
import { derivedMerchantNo } from './numbers.ts';
import type { Placer } from './placer.ts';
import { INSTANCE_STATUS } from './types.ts';

/** Local auto-renew: off unless `enabled`. Renews `cycleTimes` periods `hoursBefore` expiry, once per expiry. */
export interface AutoRenewSettings {
  enabled: boolean;
  hoursBefore: number;
  cycleTimes?: number;
}

export interface ExpiryWatchOptions {
  store: InstanceStore & OrderJournal;
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

  constructor(private readonly o: ExpiryWatchOptions) {}

  /** Warns about running instances close to expiry and, when enabled, renews them once per expiry. */
  async check(): Promise<void> {
    const { store, placer, logger, warnHours } = this.o;
    const nowSec = Math.floor(this.o.clock.now() / 1000);
    const renew = this.o.autoRenew?.enabled ? this.o.autoRenew : undefined;
    const horizon = Math.max(warnHours, renew?.hoursBefore ?? 0) * 3600;
    const soon = await store.listInstances({ statuses: [INSTANCE_STATUS.running], expiresBefore: nowSec + horizon });
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
        // Derived from the expiry being renewed: a restart, a second sweep or a second daemon on the same
        // store finds the number journaled and places nothing.
        const appOrderNo = derivedMerchantNo('RA', mark);
        if (await store.getJournal(appOrderNo)) continue;
        try {
          await placer.renew({ appOrderNo, instances: [{ instanceNo: inst.instanceNo, cycleTimes: renew.cycleTimes ?? 1 }] });
          logger?.info({ instanceNo: inst.instanceNo, appOrderNo }, 'auto-renew placed');
        } catch (err) {
          logger?.warn({ instanceNo: inst.instanceNo, appOrderNo, err }, 'auto-renew failed');
        }
      }
    }
  }
}

/** proxyType 104/105 in the platform's record (dynamic by traffic or by IP count). */
function isDynamicInstance(inst: InstanceRecord): boolean {
  const t = (inst.raw as { proxyType?: unknown } | null)?.proxyType;
  return t === 104 || t === 105 || t === '104' || t === '105';
}
