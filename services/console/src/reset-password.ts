// Resets a console account's password from the machine the image runs on (inside the container:
// `docker compose exec hse node_modules/.bin/node services/console/src/reset-password.ts admin`). The new password is
// read from standard input when something is piped in, else generated and printed once. Existing sessions of the
// account end, and the reset is written to the activity log with actor "cli".
//   usage: reset-password.ts <user name>        exit 0 done, 1 no such account or store unreachable, 2 bad usage/settings
import fs from 'node:fs';
import { ActivityLog, activityLimits } from '../../../shared/activity.ts';
import { loadConfig } from '../../../shared/config.ts';
import { Logger } from '../../../shared/log.ts';
import { connectRedis } from '../../../shared/redis.ts';
import { Accounts, USERNAME_RE } from './auth/accounts.ts';
import { generatePassword, hashPassword } from './security/password-hash.ts';

const cfg = loadConfig('console-reset-password');
const log = new Logger('console-reset-password', 'warn');
const name = process.argv[2] ?? '';
if (!USERNAME_RE.test(name)) {
  process.stderr.write('usage: reset-password.ts <user name>   (new password on standard input, or none to generate one)\n');
  process.exit(2);
}

async function main(): Promise<number> {
  const redis = connectRedis(cfg, log, 'console-reset-password');
  try {
    const accounts = new Accounts(redis);
    const account = await accounts.get(name);
    if (!account) {
      const names = (await accounts.list()).map((a) => a.username);
      process.stderr.write(`no console account named "${name}" (accounts: ${names.join(', ') || 'none'})\n`);
      return 1;
    }
    const piped = !process.stdin.isTTY ? fs.readFileSync(0, 'utf8').replace(/\r?\n$/, '') : '';
    const password = piped || generatePassword();
    const now = Date.now();
    await accounts.put({ ...account, passwordHash: await hashPassword(password), passwordChangedAt: new Date(now).toISOString(), sessionsNotBefore: now });
    await new ActivityLog(redis, activityLimits(cfg)).record({
      action: 'console.password_reset',
      actor: 'cli',
      ip: '',
      target: account.username,
      details: { sessionsEnded: true },
    });
    process.stdout.write(
      piped ? `password of "${account.username}" changed; its sessions have ended\n` : `new password of "${account.username}" (shown only now): ${password}\n`,
    );
    return 0;
  } catch (e) {
    process.stderr.write(`cannot reset the password: the store (Redis) is not reachable: ${(e as Error).message}\n`);
    return 1;
  } finally {
    redis.disconnect();
  }
}

main().then((code) => process.exit(code));
