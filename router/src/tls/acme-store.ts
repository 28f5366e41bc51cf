// What ACME mode keeps on disk, in <HSE_DATA_DIR>/tls (directory 700, files 600: private keys live here):
//   account.key       the ACME account's private key (PEM, ECDSA P-256). The CA knows the account by this key, so it
//                     is made once and kept: a new key would be a new account, with its own rate limits.
//   certificate.pem   the certificate being served: leaf first, then the CA's intermediates.
//   certificate.key   its private key (PEM). A new one is made for every order.
//   certificate.json  which CA (directory URL) and name it was ordered for, so a changed HSE_ACME_DIRECTORY_URL or
//                     HSE_PUBLIC_URL orders a new one instead of renewing the wrong certificate forever.
// Each file is written to a temporary name and renamed, so a crash mid-write leaves the old file whole.
import fs from 'node:fs';
import path from 'node:path';

export interface StoredMeta {
  directoryUrl: string;
  domain: string;
  issuedAt: string;
}

export interface StoredCertificate {
  certPem: string;
  keyPem: string;
  meta: StoredMeta | null;
}

export class AcmeStore {
  readonly dir: string;

  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'tls');
  }

  private file(name: string): string {
    return path.join(this.dir, name);
  }

  private ensureDir(): void {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    fs.chmodSync(this.dir, 0o700);
  }

  private write(name: string, content: string): void {
    this.ensureDir();
    const tmp = this.file(`.${name}.${process.pid}.tmp`);
    fs.writeFileSync(tmp, content, { mode: 0o600 });
    fs.chmodSync(tmp, 0o600);
    fs.renameSync(tmp, this.file(name));
  }

  private read(name: string): string | null {
    try {
      return fs.readFileSync(this.file(name), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new Error(`cannot read ${this.file(name)}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  }

  /** The account key, made by `create` the first time. */
  async accountKey(create: () => Promise<string>): Promise<string> {
    const existing = this.read('account.key');
    if (existing !== null) return existing;
    const pem = await create();
    this.write('account.key', pem);
    return pem;
  }

  loadCertificate(): StoredCertificate | null {
    const certPem = this.read('certificate.pem');
    const keyPem = this.read('certificate.key');
    if (certPem === null || keyPem === null) return null;
    const raw = this.read('certificate.json');
    let meta: StoredMeta | null = null;
    try {
      meta = raw === null ? null : (JSON.parse(raw) as StoredMeta);
    } catch {
      meta = null;
    }
    return { certPem, keyPem, meta };
  }

  /** Key first: a crash between the two writes leaves a mismatched pair, which loading refuses and re-orders. */
  saveCertificate(certPem: string, keyPem: string, meta: StoredMeta): void {
    this.write('certificate.key', keyPem);
    this.write('certificate.pem', certPem);
    this.write('certificate.json', `${JSON.stringify(meta, null, 2)}\n`);
  }
}
