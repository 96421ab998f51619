// Every /v1 resource, one file each.
import { accountRoutes } from './accounts.ts';
import { appRoutes } from './app.ts';
import { banRoutes } from './bans.ts';
import { assignIpRoutes } from './assign-ip.ts';
import type { RegisterRoutes } from './common.ts';
import { dictionaryRoutes } from './dictionaries.ts';
import { eventRoutes } from './events.ts';
import { instanceRoutes } from './instances.ts';
import { orderRoutes } from './orders.ts';
import { platformRoutes } from './platform.ts';
import { poolRoutes } from './pools.ts';
import { productRoutes } from './products.ts';
import { sessionRoutes } from './sessions.ts';
import { statsRoutes } from './stats.ts';
import { subAccountRoutes } from './sub-accounts.ts';
import { userRoutes } from './users.ts';
import { whitelistRoutes } from './whitelist.ts';
import { connectionRoutes } from './connections.ts';
import { usageRoutes } from './usage.ts';

export const ROUTES: readonly RegisterRoutes[] = [
  appRoutes,
  dictionaryRoutes,
  productRoutes,
  orderRoutes,
  instanceRoutes,
  assignIpRoutes,
  accountRoutes,
  subAccountRoutes,
  whitelistRoutes,
  userRoutes,
  poolRoutes,
  sessionRoutes,
  platformRoutes,
  statsRoutes,
  eventRoutes,
  connectionRoutes,
  usageRoutes,
  banRoutes,
];
