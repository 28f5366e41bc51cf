// A small browser stand-in for console tests: HTTP(S) requests through the real router (or a reverse proxy in front
// of it) with a cookie jar, optional source address on loopback (127.0.0.2 is a different client than 127.0.0.1),
// form posts, sign-in, and a reader for the live tail's Server-Sent Events.
import { spawn } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { NODE, ROOT } from './process.ts';
import { startImage, type Image, type ImageOptions } from './image.ts';

export const PASSWORD = 'correct horse battery staple';

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Set-Cookie lines of this reply. */
  cookies: string[];
}

export interface Req {
  method?: string;
  headers?: http.OutgoingHttpHeaders;
  body?: string;
  form?: Record<string, string>;
  localAddress?: string;
}

/** Starts router + console (+ a test Redis) with a known administrator password. */
export function startConsole(opts: ImageOptions = {}): Promise<Image> {
  return startImage({ services: ['console'], ...opts, env: { HSE_CONSOLE_PASSWORD: PASSWORD, ...opts.env } });
}

export class Client {
  readonly base: string;
  readonly localAddress: string | undefined;
  /** CA certificate (PEM) to trust for an https base: the test CA of a proxy in front of the image. */
  readonly ca: string | undefined;
  /** name -> value, as a browser would send them back (path and flags are not modelled; everything is /console). */
  readonly jar = new Map<string, string>();

  constructor(base: string, localAddress?: string, ca?: string) {
    this.base = base;
    this.localAddress = localAddress;
    this.ca = ca;
  }

  private send(url: string, options: https.RequestOptions, onResponse: (res: http.IncomingMessage) => void): http.ClientRequest {
    const o = { ...options, agent: false as const, localAddress: this.localAddress };
    return url.startsWith('https:') ? https.request(url, { ...o, ca: this.ca }, onResponse) : http.request(url, o, onResponse);
  }

  cookieHeader(): string {
    return [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  request(path: string, r: Req = {}): Promise<Reply> {
    const headers: http.OutgoingHttpHeaders = { ...r.headers };
    let body = r.body;
    if (r.form) {
      body = new URLSearchParams(r.form).toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    }
    if (this.jar.size && !headers.cookie) headers.cookie = this.cookieHeader();
    return new Promise((resolve, reject) => {
      const req = this.send(`${this.base}${path}`, { method: r.method ?? (body !== undefined ? 'POST' : 'GET'), headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          const cookies = res.headers['set-cookie'] ?? [];
          for (const line of cookies) {
            const [pair] = line.split(';');
            const i = pair.indexOf('=');
            const name = pair.slice(0, i);
            const value = pair.slice(i + 1);
            if (/expires=Thu, 01 Jan 1970/i.test(line) || value === '') this.jar.delete(name);
            else this.jar.set(name, value);
          }
          resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString(), cookies });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  /** The CSRF token in a page's forms. */
  static csrfOf(page: string): string {
    const m = /name="csrf" value="([^"]+)"/.exec(page);
    if (!m) throw new Error(`no CSRF field in page:\n${page.slice(0, 2000)}`);
    return m[1];
  }

  async loginForm(): Promise<string> {
    const r = await this.request('/console/login');
    if (r.status !== 200) throw new Error(`GET /console/login answered ${r.status}: ${r.body.slice(0, 500)}`);
    return Client.csrfOf(r.body);
  }

  /** Posts the sign-in form (fetching it first for its token) and returns the reply to the POST. */
  async signIn(username: string, password: string, next?: string): Promise<Reply> {
    const csrf = await this.loginForm();
    return this.request('/console/login', { form: { username, password, csrf, ...(next ? { next } : {}) } });
  }

  /** The CSRF token of the signed-in session, read from a console page. */
  async sessionCsrf(): Promise<string> {
    const r = await this.request('/console/logs');
    if (r.status !== 200) throw new Error(`GET /console/logs answered ${r.status}`);
    return Client.csrfOf(r.body);
  }

  /** Posts a form with the session's CSRF token (read from a console page once and kept). */
  async post(path: string, form: Record<string, string> = {}): Promise<Reply> {
    this.csrf ??= await this.sessionCsrf();
    return this.request(path, { form: { csrf: this.csrf, ...form } });
  }

  csrf: string | undefined;

  /** Opens the live tail. */
  stream(query = '', headers: http.OutgoingHttpHeaders = {}): Promise<EventStream> {
    return this.streamAt(`/console/logs/stream${query}`, headers);
  }

  /** Opens any console event stream (the live tail, the live machine views). */
  streamAt(path: string, headers: http.OutgoingHttpHeaders = {}): Promise<EventStream> {
    return new Promise((resolve, reject) => {
      const req = this.send(`${this.base}${path}`, { headers: { cookie: this.cookieHeader(), accept: 'text/event-stream', ...headers } }, (res) =>
        resolve(new EventStream(req, res)),
      );
      req.on('error', reject);
      req.end();
    });
  }
}

export interface SseEvent {
  event: string;
  id: string;
  data: string;
}

/** Parses a text/event-stream response as it arrives (event:, id:, data: lines; comments kept apart). */
export class EventStream {
  readonly req: http.ClientRequest;
  readonly res: http.IncomingMessage;
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  raw = '';
  ended = false;
  private buf = '';
  private waiters: (() => void)[] = [];

  constructor(req: http.ClientRequest, res: http.IncomingMessage) {
    this.req = req;
    this.res = res;
    res.setEncoding('utf8');
    res.on('data', (d: string) => {
      this.raw += d;
      this.buf += d;
      let i: number;
      for (i = this.buf.indexOf('\n\n'); i !== -1; i = this.buf.indexOf('\n\n')) {
        const block = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 2);
        const ev: SseEvent = { event: 'message', id: '', data: '' };
        let isEvent = false;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) this.comments.push(line.slice(1).trim());
          else if (line.startsWith('event: ')) {
            ev.event = line.slice(7);
            isEvent = true;
          } else if (line.startsWith('id: ')) ev.id = line.slice(4);
          else if (line.startsWith('data: ')) {
            ev.data += line.slice(6);
            isEvent = true;
          }
        }
        if (isEvent) this.events.push(ev);
      }
      this.wake();
    });
    res.on('end', () => {
      this.ended = true;
      this.wake();
    });
    res.on('error', () => {});
    req.on('error', () => {});
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Waits until an event passes `test` (or the stream ends, or the deadline passes: then it throws with what came). */
  async waitFor(test: (e: SseEvent) => boolean, what: string, ms = 20_000): Promise<SseEvent> {
    let hit: SseEvent | undefined;
    await this.until(
      () => {
        hit = this.events.find(test);
        return hit !== undefined;
      },
      what,
      ms,
    );
    return hit!;
  }

  /** Waits until the raw stream contains `text` (comments included). */
  async waitForText(text: string, ms = 20_000): Promise<void> {
    await this.until(() => this.raw.includes(text), JSON.stringify(text), ms);
  }

  private async until(cond: () => boolean, what: string, ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      if (cond()) return;
      if (this.ended || Date.now() > deadline) throw new Error(`live tail: no ${what}; received:\n${this.raw}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.req.destroy();
  }
}

/** The entry objects of `console.*` events, parsed. */
export function entryOf(e: SseEvent): { id: string; action: string; actor: string; ip: string; target: string; details: Record<string, unknown> } {
  return JSON.parse(e.data);
}

/** Attribute list of one Set-Cookie line, lower-cased names: { path: '/console', httponly: '', ... }. */
export function cookieAttributes(line: string): { name: string; value: string; attrs: Record<string, string> } {
  const [pair, ...rest] = line.split(';').map((s) => s.trim());
  const i = pair.indexOf('=');
  const attrs: Record<string, string> = {};
  for (const a of rest) {
    const j = a.indexOf('=');
    if (j === -1) attrs[a.toLowerCase()] = '';
    else attrs[a.slice(0, j).toLowerCase()] = a.slice(j + 1);
  }
  return { name: pair.slice(0, i), value: pair.slice(i + 1), attrs };
}

/** Runs one of the console's command-line tools to completion (runProcess takes no arguments). */
export function runTool(script: string, args: string[], env: Record<string, string>, stdin = ''): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(NODE, [path.join(ROOT, script), ...args], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    p.stdout.on('data', (d: Buffer) => (output += d.toString()));
    p.stderr.on('data', (d: Buffer) => (output += d.toString()));
    p.on('error', reject);
    p.on('exit', (code) => resolve({ code, output }));
    p.stdin.end(stdin);
  });
}
