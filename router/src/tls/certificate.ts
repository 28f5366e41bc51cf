// One certificate/key pair, checked before it is ever handed to the HTTPS server. Whatever the source (ACME, the
// operator's files), a pair that OpenSSL would refuse, or whose key is not the certificate's, never replaces the one
// being served: the caller keeps the old one and logs the reason this module gives.
import crypto, { X509Certificate } from 'node:crypto';
import tls from 'node:tls';
import ipaddr from 'ipaddr.js';

export interface LoadedCertificate {
  /** PEM: the leaf first, then the intermediates (a "full chain"), as clients need it. */
  certPem: string;
  keyPem: string;
  leaf: X509Certificate;
  /** DNS names and IP addresses the leaf is valid for (subjectAltName). */
  names: string[];
  notBefore: Date;
  notAfter: Date;
  serial: string;
  /** SHA-256 of the leaf (colon-separated hex, as openssl prints it): tells two certificates apart in logs. */
  fingerprint: string;
  /** Hash of certificate and key together: whether a re-read found anything new. */
  contentHash: string;
}

export class CertificateError extends Error {}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

// subjectAltName as Node prints it: `DNS:a.example, DNS:b.example, IP Address:192.0.2.1`.
function sanNames(leaf: X509Certificate): string[] {
  const out: string[] = [];
  for (const part of (leaf.subjectAltName ?? '').split(/,\s*/)) {
    const m = /^(DNS|IP Address):(.+)$/.exec(part.trim());
    if (m) out.push(m[2]);
  }
  return out;
}

/** Why OpenSSL refused a pair, in words an operator can act on (its own message is kept after a colon). */
function explain(e: Error, what: 'certificate' | 'key' | 'pair'): string {
  const msg = e.message;
  if (/key values mismatch/i.test(msg)) return 'the private key does not belong to the certificate (key values mismatch)';
  if (/no start line|bad base64|bad end line/i.test(msg)) return `the ${what} is not valid PEM (${msg})`;
  if (/bad decrypt|bad password|interrupted or cancelled/i.test(msg)) return 'the private key is encrypted; give an unencrypted PEM key';
  return `OpenSSL refused the ${what}: ${msg}`;
}

/**
 * Parses and checks a PEM chain and key. Throws CertificateError with the reason. `source` names where they came
 * from (file paths, "ACME") for the message.
 */
export function loadPair(certPem: string, keyPem: string, source: string): LoadedCertificate {
  const blocks = certPem.match(PEM_CERT);
  if (blocks === null) throw new CertificateError(`${source}: no PEM certificate found (expected "-----BEGIN CERTIFICATE-----")`);
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(blocks[0]);
  } catch (e) {
    throw new CertificateError(`${source}: ${explain(e as Error, 'certificate')}`);
  }
  try {
    crypto.createPrivateKey(keyPem);
  } catch (e) {
    throw new CertificateError(`${source}: ${explain(e as Error, 'key')}`);
  }
  // The same check the server will make (SSL_CTX_check_private_key), so a pair that passes here cannot fail there.
  try {
    tls.createSecureContext({ cert: certPem, key: keyPem });
  } catch (e) {
    throw new CertificateError(`${source}: ${explain(e as Error, 'pair')}`);
  }
  return {
    certPem,
    keyPem,
    leaf,
    names: sanNames(leaf),
    notBefore: leaf.validFromDate,
    notAfter: leaf.validToDate,
    serial: leaf.serialNumber,
    fingerprint: leaf.fingerprint256,
    contentHash: crypto.createHash('sha256').update(certPem).update('\0').update(keyPem).digest('hex'),
  };
}

/** Whether the certificate is valid for `host` (the public URL's host: a DNS name or an IP literal). */
export function covers(cert: LoadedCertificate, host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  if (ipaddr.isValid(bare)) return cert.leaf.checkIP(ipaddr.parse(bare).toString()) !== undefined;
  return cert.leaf.checkHost(bare) !== undefined;
}

/**
 * Problems worth a warning that do not stop the pair from being served (a wrong name still beats no HTTPS at all
 * while the operator fixes it, and some clients pin their own trust).
 */
export function warningsFor(cert: LoadedCertificate, host: string, now = new Date()): string[] {
  const out: string[] = [];
  if (!covers(cert, host)) {
    out.push(`the certificate is not valid for ${host} (it names ${cert.names.join(', ') || 'no subjectAltName'}); clients will refuse it`);
  }
  if (cert.notAfter <= now) out.push(`the certificate expired at ${cert.notAfter.toISOString()}; clients will refuse it`);
  if (cert.notBefore > now) out.push(`the certificate is not valid before ${cert.notBefore.toISOString()} (check this machine's clock)`);
  return out;
}

/** Log fields describing a certificate. */
export function describe(cert: LoadedCertificate): Record<string, string> {
  return {
    names: cert.names.join(','),
    notAfter: cert.notAfter.toISOString(),
    serial: cert.serial,
    sha256: cert.fingerprint,
  };
}
