// The first administrator: HSE_CONSOLE_USER (default "admin") with the password from HSE_CONSOLE_PASSWORD or the file
// named by HSE_CONSOLE_PASSWORD_FILE. With neither, a strong password is generated, stored only as a hash, and written
// to $HSE_DATA_DIR/first-admin-password (mode 600); the log says where and how to sign in, never the password. The
// configured password is used only when the account is created; afterwards the stored hash is what counts (a later
// change of the setting is reported, not applied), and a lost password is reset with
// services/console/src/reset-password.ts. With console passwords switched off (HSE_OIDC_CONSOLE_PASSWORDS=off) no such
// account is made: administrators sign in with the identity provider.
import fs from 'node:fs';
import path from 'node:path';
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
  if (cfg.oidc && !cfg.oidc.consolePasswords) {
    // Nobody can sign in with a password, so a password account would only be a dormant credential (and a generated
    // one a secret left in a file) that comes alive if passwords are switched on again. It is not made; administrators
    // come from the provider's groups. Switching passwords back on creates it at the next start, as usual.
    if (!existing) {
      log.info(
        `console passwords are off (HSE_OIDC_CONSOLE_PASSWORDS=off), so no password administrator "${cfg.consoleUser}" is created${configured !== null ? ' and the configured console password is not used' : ''}; administrators sign in with ${cfg.oidc.displayName} (HSE_OIDC_ADMIN_GROUPS)`,
      );
    }
    return;
  }
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
  // A generated password is written (owner-only) before the account exists, so a data directory that cannot take it
  // fails here, retried, rather than after: an account whose only password went nowhere would be locked for good.
  const file = firstAdminPasswordFile(cfg);
  const pending = configured === null ? writePrivate(`${file}.${process.pid}`, `${password}\n`) : null;
  const now = new Date().toISOString();
  let created: boolean;
  try {
    created = !!(await accounts.createIfMissing({
      username: cfg.consoleUser,
      role: 'admin',
      passwordHash: await hashPassword(password),
      disabled: false,
      createdAt: now,
      createdBy: 'system',
      passwordChangedAt: now,
      sessionsNotBefore: 0,
    }));
  } catch (e) {
    if (pending !== null) fs.rmSync(pending, { force: true });
    throw e;
  }
  if (!created) {
    // Another console process created it a moment ago (and wrote its own file).
    if (pending !== null) fs.rmSync(pending, { force: true });
    return;
  }
  if (pending !== null) fs.renameSync(pending, file);
  if (configured !== null) {
    log.info('first console administrator created with the configured password', { user: cfg.consoleUser });
    return;
  }
  // Only the process whose HSETNX created the account gets here. The password never goes to the log: pm2 and
  // container runtimes keep logs where others on the host may read them. It is in a file only this user can read.
  log.info(
    `first console administrator created: open ${cfg.publicOrigin}/console and sign in as "${cfg.consoleUser}" with the generated password in ${file} (readable only by this user; only its hash is stored), then keep it in a password manager and delete the file`,
    { user: cfg.consoleUser },
  );
}

/** Where a generated first-administrator password is written: $HSE_DATA_DIR/first-admin-password, mode 600. */
export function firstAdminPasswordFile(cfg: Config): string {
  return path.join(cfg.dataDir, 'first-admin-password');
}

/** Writes a file that only this user can read (created new, never an existing file's permissions); returns its path. */
function writePrivate(file: string, text: string): string {
  fs.rmSync(file, { force: true });
  fs.writeFileSync(file, text, { mode: 0o600, flag: 'wx' });
  return file;
}
