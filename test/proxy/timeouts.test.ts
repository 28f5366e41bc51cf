// Long-lived traffic through each real proxy, as configured by its example: the Tailscale control protocol and the
// relay are upgraded tunnels that can be quiet for a while (hse's map keep-alive comes every 45–50 s), the console's
// live log is a long response, and uploads may stream slowly. Behind each proxy sits a small upstream that answers
// upgrades with an echo tunnel, long-polls after a silence, and uploads when their body ends.
//   - Shortened: with the examples' one-hour values replaced by 2 s, quiet traffic is cut within seconds — so those
//     settings are what governs it (for Traefik, whose tunnels and responses readTimeout does not touch, a slow
//     upload is what it cuts).
//   - As written: the same traffic, quiet for longer than the proxy's own default (nginx 60 s, NPM 90 s in its
//     nginx.conf, Traefik's readTimeout 60 s; Caddy has none and is held as long as nginx), goes through intact.
// The holds run side by side, so the file takes about 100 s of mostly waiting.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { createTestCA, TEST_DOMAIN, type TestCA } from '../harness/ca.ts';
import { missingProxy, PROXY_KINDS, startProxy, type ProxyKind, type RunningProxy } from '../harness/proxies.ts';

/** The proxy's own default for how long upstream traffic may be quiet (0: none). */
const DEFAULT_TIMEOUT_S: Record<ProxyKind, number> = { nginx: 60, npm: 90, traefik: 60, caddy: 0 };
const MARGIN_S = 5;
const holdSeconds = (kind: ProxyKind) => (DEFAULT_TIMEOUT_S[kind] || DEFAULT_TIMEOUT_S.nginx) + MARGIN_S;

let ca: TestCA;
let upstream: http.Server;
const running: RunningProxy[] = [];

test.before(async () => {
  ca = await createTestCA();
  upstream = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/poll') {
      // A long-poll: nothing at all until the answer.
      const t = setTimeout(() => res.end('answer'), Number(url.searchParams.get('quiet_ms')));
      res.on('close', () => clearTimeout(t));
      return;
    }
    let n = 0;
    req.on('data', (d: Buffer) => (n += d.length));
    req.on('end', () => res.end(`received ${n}`));
    req.on('error', () => {});
  });
  upstream.on('upgrade', (req: http.IncomingMessage, sock) => {
    sock.on('error', () => {});
    sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${req.headers.upgrade}\r\nConnection: Upgrade\r\n\r\n`);
    sock.on('data', (d: Buffer) => sock.write(d));
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
});

test.after.always(async () => {
  for (const p of running) await p.stop();
  upstream?.close();
  ca?.remove();
});

async function proxy(kind: ProxyKind, timeout?: string): Promise<RunningProxy> {
  const p = await startProxy(kind, { domain: TEST_DOMAIN, upstream: { host: '127.0.0.1', port: (upstream.address() as AddressInfo).port }, ca, timeout });
  running.push(p);
  return p;
}

interface Tunnel {
  /** Sends `text` and resolves with what comes back, or with null if the tunnel is closed first. */
  echo(text: string): Promise<string | null>;
  closed(): boolean;
  close(): void;
}

/** POST /ts2021 with Upgrade: tailscale-control-protocol through the proxy, as the Tailscale client opens it. */
async function openTunnel(p: RunningProxy): Promise<Tunnel> {
  const s = tls.connect({ host: '127.0.0.1', port: p.port, ca: ca.caPem });
  let buf = '';
  let closed = false;
  const wake: (() => void)[] = [];
  s.on('data', (d: Buffer) => {
    buf += d.toString();
    for (const f of wake.splice(0)) f();
  });
  s.on('close', () => {
    closed = true;
    for (const f of wake.splice(0)) f();
  });
  s.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    s.once('secureConnect', () => resolve());
    s.once('close', () => reject(new Error(`${p.kind}: the TLS connection closed before the handshake finished\n${p.output()}`)));
  });
  s.write(`POST /ts2021 HTTP/1.1\r\nHost: ${TEST_DOMAIN}:${p.port}\r\nUpgrade: tailscale-control-protocol\r\nConnection: upgrade\r\nContent-Length: 0\r\n\r\n`);
  while (!buf.includes('\r\n\r\n') && !closed) await new Promise<void>((r) => wake.push(r));
  if (!/^HTTP\/1\.1 101 /.test(buf)) throw new Error(`${p.kind}: no 101 for the tunnel: ${JSON.stringify(buf.slice(0, 300))}\n${p.output()}`);
  buf = '';
  return {
    async echo(text) {
      if (closed) return null;
      s.write(text);
      while (buf.length < text.length && !closed) await new Promise<void>((r) => wake.push(r));
      const got = buf;
      buf = '';
      return got.length >= text.length ? got : null;
    },
    closed: () => closed,
    close: () => s.destroy(),
  };
}

/** A request through the proxy; resolves with status and body, or with the error's message (a cut connection). */
function request(p: RunningProxy, path: string, opts: { method?: string; chunks?: number; everyMs?: number } = {}): Promise<string> {
  return new Promise((resolve) => {
    const req = https.request(`${p.url}${path}`, { method: opts.method ?? 'GET', ca: ca.caPem, agent: false }, (res) => {
      let b = '';
      res.on('data', (d: Buffer) => (b += d.toString()));
      res.on('end', () => resolve(`${res.statusCode} ${b.slice(0, 100)}`));
      res.on('error', (e) => resolve(`cut: ${e.message}`));
    });
    req.on('error', (e) => resolve(`cut: ${e.message}`));
    if (!opts.chunks) return void req.end();
    // A slow upload: a chunk every `everyMs`, the body ending after the last one.
    void (async () => {
      for (let i = 0; i < opts.chunks!; i++) {
        if (req.destroyed) return;
        req.write('0123456789');
        await sleep(opts.everyMs!);
      }
      req.end();
    })();
  });
}

for (const kind of PROXY_KINDS) {
  const missing = missingProxy(kind);
  if (missing) {
    test(`${kind} is installed`, (t) => t.fail(missing));
    continue;
  }

  test(`${kind}: with the example's timeouts shortened to 2 s, quiet traffic is cut — those settings are what hold it open`, async (t) => {
    const p = await proxy(kind, '2s');
    if (kind === 'traefik') {
      // Traefik's readTimeout bounds how long a request may take to arrive; its tunnels and long responses are not
      // subject to it (checked in the next test). A 6 s upload is.
      const r = await request(p, '/upload', { method: 'POST', chunks: 6, everyMs: 1000 });
      // Cut by the proxy (an HTTP error status from Traefik), not refused before it: that would prove nothing.
      t.regex(r, /^[45]\d\d /, p.output());
      return;
    }
    const tunnel = await openTunnel(p);
    t.is(await tunnel.echo('hello'), 'hello');
    await sleep(5000);
    t.true(tunnel.closed(), `${kind} kept a tunnel open after 5 s of quiet with a 2 s timeout`);
    const poll = await request(p, '/poll?quiet_ms=5000');
    t.notRegex(poll, /^200 /, `${kind} waited out a 5 s long-poll with a 2 s timeout`);
  });

  test(`${kind}: as in the example, a quiet tunnel, a quiet long-poll and a slow upload outlive the proxy's default timeout`, async (t) => {
    const hold = holdSeconds(kind);
    // Generous: the hold itself is fixed, but starting the image and the proxy under a loaded CI machine is not.
    t.timeout((hold + 180) * 1000);
    const p = await proxy(kind);
    // Each step has its own deadline, so a hang names the step and shows the proxy's output.
    const step = <T>(what: string, work: Promise<T>, seconds: number): Promise<T> =>
      Promise.race([
        work,
        sleep(seconds * 1000, undefined, { ref: false }).then(() => {
          throw new Error(`${kind}: ${what} did not finish within ${seconds} s\n${p.output().slice(-3000)}`);
        }),
      ]);
    const tunnel = await step('opening the tunnel', openTunnel(p), 30);
    t.is(await step('the first echo', tunnel.echo('before'), 30), 'before');
    const uploadChunks = hold / MARGIN_S + 1;
    const [poll, upload] = await Promise.all([
      step('the long-poll', request(p, `/poll?quiet_ms=${hold * 1000}`), hold + 30),
      step('the slow upload', request(p, '/upload', { method: 'POST', chunks: uploadChunks, everyMs: MARGIN_S * 1000 }), uploadChunks * MARGIN_S + 30),
      sleep(hold * 1000),
    ]);
    t.is(await step('the echo after the quiet', tunnel.echo(`after ${hold} s of quiet`), 30), `after ${hold} s of quiet`, p.output());
    t.is(poll, '200 answer');
    t.is(upload, `200 received ${uploadChunks * 10}`);
    tunnel.close();
  });
}
