// The container's HEALTHCHECK (via deploy/healthcheck.sh): asks the router for /health, which it forwards to the
// coordination service, which answers 200 only when it can reach Redis. So one request proves the public listener, the
// router-to-service hop over the Unix socket, the service and the store. Prints one line; exit 0 healthy, 1 not.
import http from 'node:http';
import https from 'node:https';
import { loadConfig, type Config } from '../shared/config.ts';

/** Where the router can be reached from inside the container (or host): a wildcard bind is asked on loopback. */
export function healthUrl(cfg: Config): URL {
  const host = cfg.listenAddress === '0.0.0.0' ? '127.0.0.1' : cfg.listenAddress === '::' ? '::1' : cfg.listenAddress;
  const h = host.includes(':') ? `[${host}]` : host;
  // TLS mode: the router's HTTPS port (the plain port only redirects there). Otherwise the plain HTTP port.
  return cfg.tlsMode ? new URL(`https://${h}:${cfg.httpsPort}/health`) : new URL(`http://${h}:${cfg.httpPort}/health`);
}

export function probe(cfg: Config, timeoutMs = 4000): Promise<{ ok: boolean; line: string }> {
  const url = healthUrl(cfg);
  return new Promise((resolve) => {
    const opts = {
      timeout: timeoutMs,
      // Liveness, not identity: the certificate belongs to the public name, and this asks on loopback.
      rejectUnauthorized: false,
      servername: cfg.publicUrl.hostname,
      headers: { host: cfg.publicUrl.host },
    };
    // With HSE_LISTEN_SOCKET the router has no TCP port: ask on its socket.
    const where = cfg.listenSocket !== null ? { ...opts, socketPath: cfg.listenSocket } : opts;
    const req = (url.protocol === 'https:' && cfg.listenSocket === null ? https : http).get(url, where, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        if (body.length < 500) body += d;
      });
      res.on('end', () => {
        const ok = res.statusCode === 200;
        resolve({ ok, line: `hse health: ${ok ? 'healthy' : 'unhealthy'}: ${url.href} answered ${res.statusCode} ${body.trim().slice(0, 200)}` });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (e) => resolve({ ok: false, line: `hse health: unhealthy: ${url.href}: ${e.message}` }));
  });
}

if (import.meta.main) {
  const cfg = loadConfig('healthcheck');
  const r = await probe(cfg);
  (r.ok ? process.stdout : process.stderr).write(`${r.line}\n`);
  process.exit(r.ok ? 0 : 1);
}
