// Automatic certificates over ACME (RFC 8555) with the acme-client library: Let's Encrypt by default, any ACME CA
// through HSE_ACME_DIRECTORY_URL. HTTP-01 only: the CA fetches a token from port 80 (challenges.ts, answered by
// http-redirect.ts), which TLS mode serves anyway; no DNS provider credentials needed.
//
// Life cycle:
//   start  -> a stored certificate for this name and CA is served at once (restarts do not touch the CA);
//             otherwise one is ordered;
//   served -> renewed at two thirds of its lifetime (renewal.ts); the new one replaces it for new connections
//             while open connections carry on (no downtime);
//   failed -> the CA's reason is logged, whatever is being served stays, and the order is retried with backoff.
// A private ACME CA's own TLS certificate is trusted through Node's NODE_EXTRA_CA_CERTS (the tests do that).
import type { Config } from '../../../shared/config.ts';
import type { Logger } from '../../../shared/log.ts';
import ipaddr from 'ipaddr.js';
import type { AcmeStore } from './acme-store.ts';
import { CertificateError, covers, loadPair, type LoadedCertificate } from './certificate.ts';
import type { ChallengeStore } from './challenges.ts';
import { checkDomain } from './domain-check.ts';
import { dueForRenewal, renewalTime, retryDelayMs, waitUntil } from './renewal.ts';

export interface AcmeOptions {
  cfg: Config;
  log: Logger;
  store: AcmeStore;
  challenges: ChallengeStore;
  onCertificate(cert: LoadedCertificate, how: string): void;
  onProblem(reason: string): void;
}

export interface AcmeManager {
  stop(): void;
}

/** A hint for the CA messages operators meet most, after the CA's own words. */
function hintFor(reason: string): string | undefined {
  if (/NXDOMAIN|no valid A|DNS problem|SERVFAIL|no such host|could not resolve/i.test(reason))
    return 'the CA could not resolve the name: check its DNS records';
  if (/connection refused|timeout|timed out|fetching http|connect/i.test(reason)) {
    return 'the CA could not fetch http://<name>/.well-known/acme-challenge/… : port 80 must reach this router from the internet';
  }
  if (/rateLimited|rate limit|too many/i.test(reason)) return "the CA's rate limit: the order is retried later, nothing to do";
  if (/certificate|self.signed|unable to verify/i.test(reason))
    return "the ACME directory's own TLS certificate is not trusted (private CA? set NODE_EXTRA_CA_CERTS)";
  return undefined;
}

function reasonOf(e: unknown): string {
  const err = e as { message?: string; code?: string; config?: { url?: string } };
  const msg = err.message ?? String(e);
  // Network failures from the HTTP client carry the URL they were going to; name it, the message alone does not.
  if (err.config?.url !== undefined) return `${msg} (${err.config.url})`;
  return msg || (err.code ?? 'unknown error');
}

export function startAcme(opts: AcmeOptions): AcmeManager {
  const { cfg, log, store, challenges } = opts;
  const host = cfg.publicUrl.hostname.replace(/^\[|\]$/g, '');
  const directoryUrl = cfg.acmeDirectoryUrl;
  let cert: LoadedCertificate | null = null;
  /** The served certificate was ordered for another CA or name: replace it, not renew it on its own schedule. */
  let mismatched = false;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  function schedule(ms: number): void {
    clearTimeout(timer);
    if (stopped) return;
    timer = setTimeout(() => void tick(), ms);
    timer.unref();
  }

  async function tick(): Promise<void> {
    if (cert !== null && !mismatched && !dueForRenewal(cert.notBefore, cert.notAfter)) {
      schedule(waitUntil(renewalTime(cert.notBefore, cert.notAfter)));
      return;
    }
    await attempt();
  }

  async function order(): Promise<LoadedCertificate> {
    const acme = (await import('acme-client')).default;
    acme.setLogger((m: string) => log.debug(`acme-client: ${m}`));
    const accountKey = await store.accountKey(async () => (await acme.crypto.createPrivateEcdsaKey()).toString());
    const client = new acme.Client({ directoryUrl, accountKey, backoffAttempts: 10, backoffMin: 1000, backoffMax: 30_000 });
    const certKey = await acme.crypto.createPrivateEcdsaKey();
    // A common name is limited to 64 characters; the subjectAltName is what clients check anyway.
    const [, csr] = await acme.crypto.createCsr({ ...(host.length <= 64 ? { commonName: host } : {}), altNames: [host] }, certKey);
    const pem = await client.auto({
      csr,
      email: cfg.acmeEmail ?? undefined,
      termsOfServiceAgreed: true,
      challengePriority: ['http-01'],
      // acme-client's own pre-check fetches the token through this machine's DNS and port 80, which says nothing
      // about what the CA sees (split DNS, NAT without hairpinning); domain-check.ts logs that view instead.
      skipChallengeVerification: true,
      challengeCreateFn: async (_authz, challenge, keyAuthorization) => {
        if (challenge.type !== 'http-01') throw new Error(`the CA offered no http-01 challenge (got ${challenge.type})`);
        challenges.set(challenge.token, keyAuthorization);
      },
      challengeRemoveFn: async (_authz, challenge) => {
        challenges.delete(challenge.token);
      },
    });
    const loaded = loadPair(pem, certKey.toString(), `ACME certificate from ${directoryUrl}`);
    store.saveCertificate(loaded.certPem, loaded.keyPem, { directoryUrl, domain: host, issuedAt: new Date().toISOString() });
    return loaded;
  }

  async function attempt(): Promise<void> {
    const renewing = cert !== null;
    log.info(renewing ? 'ACME: renewing the certificate' : 'ACME: ordering a certificate', {
      domain: host,
      directory: directoryUrl,
      email: cfg.acmeEmail ?? 'none',
    });
    const check = await checkDomain(host);
    if (check.level === 'error') log.error(`ACME: ${check.message}`);
    else if (check.level === 'info') log.info(`ACME: ${check.message}`);
    try {
      const next = await order();
      if (stopped) return;
      failures = 0;
      mismatched = false;
      cert = next;
      log.info(renewing ? 'ACME: certificate renewed' : 'ACME: certificate issued', {
        domain: host,
        notAfter: next.notAfter.toISOString(),
        renewAt: renewalTime(next.notBefore, next.notAfter).toISOString(),
      });
      opts.onCertificate(next, renewing ? 'acme-renewal' : 'acme');
      schedule(waitUntil(renewalTime(next.notBefore, next.notAfter)));
    } catch (e) {
      if (stopped) return;
      failures++;
      const reason = reasonOf(e);
      const expiresIn = cert === null ? null : cert.notAfter.getTime() - Date.now();
      const delay = retryDelayMs(failures, expiresIn);
      log.error(`ACME: no certificate for ${host}: ${reason}`, {
        hint: hintFor(reason),
        directory: directoryUrl,
        serving: cert === null ? 'nothing (HTTPS refuses connections)' : `the previous certificate until ${cert.notAfter.toISOString()}`,
        retryInSeconds: Math.round(delay / 1000),
        failures,
      });
      if (cert === null) opts.onProblem(`ACME failed: ${reason}`);
      schedule(delay);
    }
  }

  function fromDisk(): void {
    let stored: ReturnType<typeof store.loadCertificate>;
    try {
      stored = store.loadCertificate();
    } catch (e) {
      log.warn('ACME: the stored certificate cannot be read; ordering a new one', { error: (e as Error).message });
      return;
    }
    if (stored === null) return;
    let loaded: LoadedCertificate;
    try {
      loaded = loadPair(stored.certPem, stored.keyPem, `${store.dir}/certificate.pem + certificate.key`);
    } catch (e) {
      if (!(e instanceof CertificateError)) throw e;
      log.warn('ACME: the stored certificate is not usable; ordering a new one', { reason: e.message });
      return;
    }
    if (loaded.notAfter.getTime() <= Date.now() || !covers(loaded, host)) {
      log.info('ACME: the stored certificate is expired or for another name; ordering a new one', {
        names: loaded.names.join(','),
        notAfter: loaded.notAfter.toISOString(),
      });
      return;
    }
    cert = loaded;
    mismatched = stored.meta?.directoryUrl !== directoryUrl || stored.meta?.domain !== host;
    if (mismatched)
      log.info('ACME: the stored certificate comes from another CA (HSE_ACME_DIRECTORY_URL changed); serving it until a new one is issued', {
        was: stored.meta?.directoryUrl ?? 'unknown',
      });
    opts.onCertificate(loaded, 'acme-stored');
  }

  if (ipaddr.isValid(host)) {
    const reason = `ACME needs a DNS name, and HSE_PUBLIC_URL's host ${host} is an IP address: use a name, or give HSE_TLS_CERT_FILE and HSE_TLS_KEY_FILE`;
    log.error(reason);
    opts.onProblem(reason);
    return { stop() {} };
  }
  fromDisk();
  schedule(0);
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
