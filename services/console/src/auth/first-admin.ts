// The first administrator: HSE_CONSOLE_USER (default "admin") with the password from HSE_CONSOLE_PASSWORD or the file
// named by HSE_CONSOLE_PASSWORD_FILE. With neither, a strong password is generated, stored only as a hash, and printed
// once to the log together with how to sign in. The configured password is used only when the account is created;
// afterwards the stored hash is what counts (a later change of the setting is reported, not applied), and a lost
// password is reset with services/console/src/reset-password.ts.
import fs from 'node:fs';
import type { Config } from '../../../../shared/config.ts';
import type { Logger } from '../../../../shared/log.ts';
import { generatePassword, hashPassword, verifyPassword } from '../security/password-hash.ts';
import type { Accounts } from './accounts.ts';

/** A setting the console cannot use; main prints it in the configuration-refusal format and exits 2. */
export class SettingError extends Error {
  readonly variable: string;
  constructor(variable: string, reason: string) {
    super(reason);
    this.variable = variable;
  }
}

/** The configured password, or null when none is configured. */
export function configuredPassword(cfg: Config): string | null {
  if (cfg.consolePassword !== null && cfg.consolePasswordFile !== null) {
    throw new SettingError('HSE_CONSOLE_PASSWORD_FILE', 'set either HSE_CONSOLE_PASSWORD or HSE_CONSOLE_PASSWORD_FILE, not both');
  }
  if (cfg.consolePassword !== null) return cfg.consolePassword;
  if (cfg.consolePasswordFile === null) return null;
  let text: string;
  try {
    text = fs.readFileSync(cfg.consolePasswordFile, 'utf8');
  } catch (e) {
    throw new SettingError(
      'HSE_CONSOLE_PASSWORD_FILE',
      `cannot read "${cfg.consolePasswordFile}" (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); check the path and that this user may read it`,
    );
  }
  // Secret files usually end with a newline that is not part of the password.
  const pw = text.replace(/\r?\n$/, '');
  if (pw === '') throw new SettingError('HSE_CONSOLE_PASSWORD_FILE', `"${cfg.consolePasswordFile}" is empty`);
  return pw;
}

export async function ensureFirstAdmin(cfg: Config, accounts: Accounts, log: Logger): Promise<void> {
  const configured = configuredPassword(cfg);
  const existing = await accounts.get(cfg.consoleUser);
  if (existing) {
    if (configured !== null && !(await verifyPassword(configured, existing.passwordHash))) {
      log.warn(
        'the configured console password differs from the stored one; it is only used when the account is first created, so the stored one still applies',
        {
          user: existing.username,
          reset: `node services/console/src/reset-password.ts ${existing.username}`,
        },
      );
    }
    return;
  }
  if (configured !== null && configured.length < 12) {
    log.warn('the configured console password is shorter than 12 characters; choose a longer one', { user: cfg.consoleUser });
  }
  const password = configured ?? generatePassword();
  const now = new Date().toISOString();
  const created = await accounts.createIfMissing({
    username: cfg.consoleUser,
    role: 'admin',
    passwordHash: await hashPassword(password),
    disabled: false,
    createdAt: now,
    createdBy: 'system',
    passwordChangedAt: now,
    sessionsNotBefore: 0,
  });
  if (!created) return; // another console process created it a moment ago
  if (configured !== null) {
    log.info('first console administrator created with the configured password', { user: cfg.consoleUser });
    return;
  }
  // Printed exactly once: only the process whose HSETNX created the account gets here.
  log.info(
    `first console administrator created: open ${cfg.publicOrigin}/console and sign in as "${cfg.consoleUser}" with the password at the end of this line; it is shown only this once (only its hash is stored), so keep it in a password manager`,
    { user: cfg.consoleUser, password },
  );
}
