// A browser stand-in that talks HTTPS to a proxy: trusts the test CA only, keeps a cookie jar, and can leave from a
// chosen loopback address (127.0.0.2 is a different client than the proxy at 127.0.0.1). Redirects are not followed,
// so tests see them.
import https from 'node:https';
import type { OutgoingHttpHeaders, IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  cookies: string[];
}

export interface Req {
  method?: string;
  headers?: OutgoingHttpHeaders;
  form?: Record<string, string>;
}

export class HttpsClient {
  readonly base: string;
  readonly ca: string;
  readonly localAddress: string | undefined;
  readonly jar = new Map<string, string>();

  constructor(base: string, ca: string, localAddress?: string) {
    this.base = base;
    this.ca = ca;
    this.localAddress = localAddress;
  }

  request(path: string, r: Req = {}): Promise<Reply> {
    const headers: OutgoingHttpHeaders = { ...r.headers };
    let body: string | undefined;
    if (r.form) {
      body = new URLSearchParams(r.form).toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    }
    if (this.jar.size && !headers.cookie) headers.cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    return new Promise((resolve, reject) => {
      const req = https.request(
        `${this.base}${path}`,
        { method: r.method ?? (body !== undefined ? 'POST' : 'GET'), headers, ca: this.ca, agent: false, localAddress: this.localAddress },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => chunks.push(d));
          res.on('end', () => {
            const cookies = res.headers['set-cookie'] ?? [];
            for (const line of cookies) {
              const [pair] = line.split(';');
              const i = pair.indexOf('=');
              const value = pair.slice(i + 1);
              if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) this.jar.delete(pair.slice(0, i));
              else this.jar.set(pair.slice(0, i), value);
            }
            resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString(), cookies });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  /** Fetches the sign-in form, then posts it; extra headers go on the POST (forged X-Forwarded-For, ...). */
  async signIn(username: string, password: string, headers: OutgoingHttpHeaders = {}): Promise<Reply> {
    const page = await this.request('/console/login');
    if (page.status !== 200) throw new Error(`GET /console/login through the proxy answered ${page.status}: ${page.body.slice(0, 300)}`);
    const m = /name="csrf" value="([^"]+)"/.exec(page.body);
    if (!m) throw new Error(`no CSRF field on the sign-in page:\n${page.body.slice(0, 1000)}`);
    return this.request('/console/login', { form: { username, password, csrf: m[1] }, headers });
  }
}

/** Polls `path` through the proxy until it answers 200 (the proxy may listen before its routes are loaded). */
export async function waitProxied(base: string, ca: string, path = '/health', ms = 30_000): Promise<void> {
  const c = new HttpsClient(base, ca);
  const deadline = Date.now() + ms;
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const r = await c.request(path);
      if (r.status === 200) return;
      last = `${r.status} ${r.body.slice(0, 200)}`;
    } catch (e) {
      last = (e as Error).message;
    }
    await sleep(200);
  }
  throw new Error(`${base}${path} did not answer 200 through the proxy; last: ${last}`);
}
