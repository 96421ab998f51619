// The daemon's request rules and ban table, made from the config (src/main.ts plugs them into the router and
// the admin API).
import type { Config } from '../config/schema.ts';
import { BanTable } from './request-bans.ts';
import { RequestRules } from './request-rules.ts';

export function requestRulesFor(config: Pick<Config, 'proxy'>, now?: () => number): { requestRules: RequestRules; bans: BanTable } {
  return { requestRules: new RequestRules(config.proxy.requestRules), bans: new BanTable(now ? { now } : {}) };
}
