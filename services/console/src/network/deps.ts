// What the network pages (machines, routes, users, keys, device approval, DNS, access controls) need: the admin API
// client, the settings, the session gate, and the change feed for live views.
import type { ConsoleMiddleware } from '../request/context.ts';
import type { AdminClient } from '../../../../shared/admin-client.ts';
import type { Config } from '../../../../shared/config.ts';
import type { Logger } from '../../../../shared/log.ts';
import type { Redis } from 'ioredis';
import type { Accounts } from '../auth/accounts.ts';
import type { ChangeFeed } from './change-feed.ts';

export interface NetworkDeps {
  cfg: Config;
  admin: AdminClient;
  gate: ConsoleMiddleware;
  feed: ChangeFeed;
  redis: Redis;
  accounts: Accounts;
  log: Logger;
}
