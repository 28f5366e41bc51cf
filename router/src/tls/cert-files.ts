// Operator-provided certificate and key (HSE_TLS_CERT_FILE, HSE_TLS_KEY_FILE), reloaded when they change on disk.
//
// Change detection, two ways, because either alone misses cases:
//   - fs.watch on the directories holding the files (not the files: certbot, cert-manager and most tools replace a
//     file by renaming a new one over it or by swapping a symlink, which a watch on the old inode never reports);
//   - a stat of both files every POLL_MS (inode, size, mtime), for file systems where inotify says nothing (NFS,
//     some bind mounts) and for directories that do not exist yet.
// Either one triggers a read of both files after a short pause, so a tool that writes the certificate and then the
// key is read once, complete. A pair that cannot be used (missing, unreadable, not PEM, key not matching) never
// replaces the one being served: the reason is logged, and the next change is tried again.
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../../shared/log.ts';
import { CertificateError, loadPair, warningsFor, type LoadedCertificate } from './certificate.ts';

const POLL_MS = 30_000;
const SETTLE_MS = 300;

export interface CertFilesOptions {
  certFile: string;
  keyFile: string;
  /** The public URL's host, to warn when the certificate does not name it. */
  host: string;
  log: Logger;
  /** A new, valid pair was read. */
  onCertificate(cert: LoadedCertificate): void;
  /** No usable pair: `reason` says why (and whether an older one is still being served). */
  onProblem(reason: string): void;
}

export interface CertFilesWatcher {
  /** Reads the files now (also used at start). */
  reload(): void;
  stop(): void;
}

function readable(file: string, variable: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') throw new CertificateError(`${variable} ${file} does not exist`);
    if (err.code === 'EACCES')
      throw new CertificateError(`${variable} ${file} cannot be read by this process (permission denied; uid ${process.getuid?.() ?? '?'})`);
    if (err.code === 'EISDIR') throw new CertificateError(`${variable} ${file} is a directory, not a PEM file`);
    throw new CertificateError(`${variable} ${file} cannot be read: ${err.code ?? err.message}`);
  }
}

function statKey(file: string): string {
  try {
    const s = fs.statSync(file);
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? 'error';
  }
}

export function watchCertificateFiles(opts: CertFilesOptions): CertFilesWatcher {
  const { certFile, keyFile, log } = opts;
  let current: LoadedCertificate | null = null;
  let lastError: string | null = null;
  let lastStat = '';
  let settle: NodeJS.Timeout | undefined;
  const watchers: fs.FSWatcher[] = [];

  function reload(): void {
    lastStat = `${statKey(certFile)}|${statKey(keyFile)}`;
    let next: LoadedCertificate;
    try {
      next = loadPair(readable(certFile, 'HSE_TLS_CERT_FILE'), readable(keyFile, 'HSE_TLS_KEY_FILE'), `${certFile} + ${keyFile}`);
    } catch (e) {
      if (!(e instanceof CertificateError)) throw e;
      const reason = e.message;
      // Logged once per distinct problem: the poll would otherwise repeat it every 30 s.
      if (reason !== lastError) {
        lastError = reason;
        if (current) log.error('certificate files not usable; still serving the previous certificate', { reason, notAfter: current.notAfter.toISOString() });
        else log.error('certificate files not usable; HTTPS refuses connections until they are fixed', { reason });
      }
      opts.onProblem(reason);
      return;
    }
    lastError = null;
    if (current !== null && current.contentHash === next.contentHash) return;
    for (const w of warningsFor(next, opts.host)) log.warn(w, { file: certFile });
    current = next;
    opts.onCertificate(next);
  }

  function soon(): void {
    clearTimeout(settle);
    settle = setTimeout(reload, SETTLE_MS);
  }

  for (const dir of new Set([path.dirname(path.resolve(certFile)), path.dirname(path.resolve(keyFile))])) {
    try {
      const w = fs.watch(dir, { persistent: false }, () => soon());
      w.on('error', (e: Error) => log.warn('cannot watch the certificate directory; changes are noticed by polling only', { dir, error: e.message }));
      watchers.push(w);
    } catch (e) {
      log.warn('cannot watch the certificate directory; changes are noticed by polling only', {
        dir,
        error: (e as NodeJS.ErrnoException).code ?? (e as Error).message,
        everyMs: POLL_MS,
      });
    }
  }
  const poll = setInterval(() => {
    if (`${statKey(certFile)}|${statKey(keyFile)}` !== lastStat) soon();
  }, POLL_MS);
  poll.unref();

  return {
    reload,
    stop() {
      clearTimeout(settle);
      clearInterval(poll);
      for (const w of watchers) w.close();
    },
  };
}
