// The platform's count for ?compare=platform: the flow-use log (ProxyFlowUseLog; `used` in bytes per the
// seed, `usedTime` epoch seconds) of one main account and product over the window, every page.
import type { Traffic } from '../accounts/traffic.ts';
import type { PlatformFlow } from './usage.ts';

export function platformFlowFrom(traffic: Pick<Traffic, 'flowLogAll' | 'formatTime'>): PlatformFlow {
  return async (account, productNo, from, to) => {
    try {
      const page = await traffic.flowLogAll({
        account,
        productNo,
        startTime: traffic.formatTime(from),
        endTime: traffic.formatTime(to - 1000),
      });
      return page.entries.filter((e) => e.time !== undefined).map((e) => ({ usedBytes: e.usedBytes, at: e.time! * 1000 }));
    } catch (err) {
      // A product without a flow-use log: the platform keeps no count to compare with.
      if ((err as { code?: string }).code === 'NOT_SUPPORTED') return null;
      throw err;
    }
  };
}
