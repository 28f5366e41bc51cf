// Runs the four reverse proxies of advanced/proxy/ for real, each from its example file with only the public name,
// the upstream and the TLS certificate substituted (plus where it listens: 127.0.0.1 and free ports, never the
// machine's 80/443):
//   nginx   Debian's nginx, the drop-in advanced/proxy/nginx/hse.conf wrapped in a minimal main config;
//   caddy   Debian's caddy, the site block advanced/proxy/caddy/Caddyfile after a global block that turns off
//           the admin endpoint and ACME;
//   traefik Traefik v3 (.ci/install-proxies.sh), advanced/proxy/traefik/{traefik.yml,hse.yml};
//   npm     Nginx Proxy Manager reproduced as Debian's nginx: test/proxy/npm-template.ts renders what NPM generates
//           for the fields in advanced/proxy/npm/proxy-host.json plus the Advanced block advanced.conf.
// Every substitution checks that its pattern is in the example, so an edited example cannot silently drift away
// from what is tested.
//
// With `instances` (several hse instances, advanced/ha.md), nginx, Caddy and Traefik run from the examples in
// advanced/ha/ instead, whose upstreams hse-a:8080 and hse-b:8080 become the given addresses (Traefik's static file is
// the same as for one instance).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestCA } from './ca.ts';
import { renderNpmProxyHost, type NpmProxyHost } from '../proxy/npm-template.ts';
import { findBinary, freePort, HEAD_AND_TAIL, ROOT, startProcess, type Proc } from './process.ts';

export type ProxyKind = 'nginx' | 'caddy' | 'traefik' | 'npm';
export const PROXY_KINDS: ProxyKind[] = ['nginx', 'caddy', 'traefik', 'npm'];

export const EXAMPLES = path.join(ROOT, 'advanced/proxy');
/** The examples for several instances behind one proxy (advanced/ha.md). */
export const HA_EXAMPLES = path.join(ROOT, 'advanced/ha');
/** The upstreams the HA examples name, in order. */
export const HA_EXAMPLE_UPSTREAMS = ['hse-a:8080', 'hse-b:8080'];

const BINARY: Record<ProxyKind, string> = { nginx: 'nginx', caddy: 'caddy', traefik: 'traefik', npm: 'nginx' };
const INSTALL: Record<ProxyKind, string> = {
  nginx: 'apt-get install nginx',
  caddy: 'apt-get install caddy',
  traefik: 'bash .ci/install-proxies.sh',
  npm: 'apt-get install nginx',
};

/** null when the proxy can run here, else what to install. */
export function missingProxy(kind: ProxyKind): string | null {
  return findBinary(BINARY[kind]) ? null : `${BINARY[kind]} not found; install it: ${INSTALL[kind]}`;
}

/** Where the proxy reaches hse: its TCP port, or the router's Unix socket (HSE_LISTEN_SOCKET; nginx and Caddy only). */
export type Upstream = { host: string; port: number } | { socket: string };

/** The socket path the examples show in their commented-out socket variant. */
const EXAMPLE_SOCKET = '/run/hse/router.sock';

export interface ProxyOptions {
  /** The public host name the proxy serves; the tests use the IP literal of test/harness/ca.ts. */
  domain: string;
  upstream: Upstream;
  /**
   * Two instances (advanced/ha/ examples): their routers' addresses, replacing hse-a:8080 and hse-b:8080 in order;
   * `upstream` is then ignored. nginx, Caddy and Traefik only.
   */
  instances?: { host: string; port: number }[];
  ca: TestCA;
  /** Ports to listen on (127.0.0.1). Default: free ones. Choose them first when the public URL must be known early. */
  ports?: Ports;
  /**
   * Replaces the examples' one-hour timeouts (every `3600s`) with this value, to show in seconds that those settings
   * are what keeps quiet tunnels open.
   */
  timeout?: string;
  /** npm only: changes the Advanced block before use (to show what one of its lines is for). */
  npmAdvanced?: (text: string) => string;
  /** npm only: extra set_real_ip_from ranges, as if clients reached NPM from a network its nginx.conf trusts. */
  npmExtraRealIpFrom?: string[];
}

export interface RunningProxy {
  kind: ProxyKind;
  /** https://<domain>:<port>, the public URL clients use. */
  url: string;
  port: number;
  /** The plain-HTTP port, where the example has one (redirects only). */
  httpPort: number | null;
  dir: string;
  /** The configuration files as started, for messages. */
  files: Record<string, string>;
  output(): string;
  stop(): Promise<void>;
}

/** Replaces every match of `pattern`, failing when there is none, so examples and harness stay in step. */
export function substitute(text: string, pattern: string | RegExp, replacement: string, file: string): string {
  const re = typeof pattern === 'string' ? new RegExp(pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'g') : pattern;
  if (!re.global) throw new Error('substitute() needs a global pattern');
  if (!re.test(text)) throw new Error(`${file}: expected to find ${pattern} in the example; update test/harness/proxies.ts with the example`);
  re.lastIndex = 0;
  return text.replace(re, () => replacement);
}

const EXAMPLE_DOMAIN = 'vpn.example.com';

/** The HA example's two upstream addresses (hse-a:8080, hse-b:8080) replaced by the two instances'. */
function haUpstreams(text: string, instances: { host: string; port: number }[], file: string): string {
  if (instances.length !== 2) throw new Error('the HA examples name two instances; give exactly two');
  let s = text;
  HA_EXAMPLE_UPSTREAMS.forEach((example, i) => {
    s = substitute(s, example, `${instances[i].host}:${instances[i].port}`, file);
  });
  return s;
}

function read(rel: string, opts?: ProxyOptions): string {
  const ha = opts?.instances !== undefined && fs.existsSync(path.join(HA_EXAMPLES, rel));
  let text = fs.readFileSync(path.join(ha ? HA_EXAMPLES : EXAMPLES, rel), 'utf8');
  if (ha) text = haUpstreams(text, opts!.instances!, `ha/${rel}`);
  if (opts?.timeout === undefined || !/\.(conf|yml)$|Caddyfile$/.test(rel) || rel === 'traefik/hse.yml') return text;
  return substitute(text, /\b3600s\b/g, opts.timeout, rel);
}

// ---------------------------------------------------------------------------------------------------------------
// nginx

export interface Ports {
  https: number;
  http: number;
}

/** advanced/proxy/nginx/hse.conf with name, upstream, certificate and listeners substituted (http context). */
export function nginxSite(opts: ProxyOptions, ports: Ports): string {
  const f = 'nginx/hse.conf';
  let s = read(f, opts);
  s = substitute(s, /^[ \t]*ssl_certificate[ \t]+\S+;/gm, `    ssl_certificate     ${opts.ca.certFile};`, f);
  s = substitute(s, /^[ \t]*ssl_certificate_key[ \t]+\S+;/gm, `    ssl_certificate_key ${opts.ca.keyFile};`, f);
  s = substitute(s, EXAMPLE_DOMAIN, opts.domain, f);
  if (opts.instances) {
    // read() has put the instances' addresses in.
  } else if ('socket' in opts.upstream) {
    // The example's own socket line, uncommented, replaces the TCP server line.
    s = substitute(s, /^[ \t]*server 127\.0\.0\.1:8080;\n/gm, '', f);
    s = substitute(s, new RegExp(`^([ \\t]*)# (server unix:)${EXAMPLE_SOCKET.replace(/[./]/g, '\\$&')};`, 'gm'), `    server unix:${opts.upstream.socket};`, f);
  } else {
    s = substitute(s, '127.0.0.1:8080', `${opts.upstream.host}:${opts.upstream.port}`, f);
  }
  s = substitute(s, /^\s*listen \[::\]:\d+( ssl)?;\n/gm, '', f);
  s = substitute(s, /listen 443 ssl;/g, `listen 127.0.0.1:${ports.https} ssl;`, f);
  s = substitute(s, /listen 80;/g, `listen 127.0.0.1:${ports.http};`, f);
  return s;
}

/** A minimal main nginx.conf around an http-context file: foreground, private prefix, logs to stderr. */
export function nginxMain(dir: string, httpContext: string): string {
  const asRoot = process.getuid?.() === 0;
  return [
    'daemon off;',
    'worker_processes 1;',
    // As root, nginx's workers would switch to "nobody", which cannot read the private temp directories below.
    asRoot ? 'user root;' : '',
    `pid ${path.join(dir, 'nginx.pid')};`,
    'error_log stderr notice;',
    'events { worker_connections 256; }',
    'http {',
    '    include /etc/nginx/mime.types;',
    '    default_type application/octet-stream;',
    '    access_log off;',
    ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `    ${t}_temp_path ${path.join(dir, `${t}_temp`)};`),
    httpContext,
    '}',
    '',
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------------------------
// Caddy

/** A global block keeping Caddy to itself (no admin endpoint, no HTTP->HTTPS redirect listener, storage in the temp dir), then the example. */
export function caddyfile(opts: ProxyOptions, ports: Ports, dir: string): string {
  const f = 'caddy/Caddyfile';
  let s = read(f, opts);
  s = substitute(s, `${EXAMPLE_DOMAIN} {`, `https://${opts.domain}:${ports.https} {\n\ttls ${opts.ca.certFile} ${opts.ca.keyFile}\n\tbind 127.0.0.1`, f);
  if (opts.instances) {
    // read() has put the instances' addresses in.
  } else if ('socket' in opts.upstream) {
    // The example's comment gives the socket form of the reverse_proxy line; it replaces the TCP one.
    substitute(s, `reverse_proxy unix/${EXAMPLE_SOCKET} {`, '', f);
    s = substitute(s, /reverse_proxy 127\.0\.0\.1:8080 \{/g, `reverse_proxy unix/${opts.upstream.socket} {`, f);
  } else {
    s = substitute(s, '127.0.0.1:8080', `${opts.upstream.host}:${opts.upstream.port}`, f);
  }
  const global = [
    '{',
    '\tadmin off',
    '\tauto_https disable_redirects',
    `\thttp_port ${ports.http}`,
    `\thttps_port ${ports.https}`,
    `\tstorage file_system ${path.join(dir, 'storage')}`,
    '}',
    '',
  ].join('\n');
  return global + s;
}

// ---------------------------------------------------------------------------------------------------------------
// Traefik

/** Static configuration: the example's, listening on loopback ports, with the ACME resolver taken out. */
export function traefikStatic(opts: ProxyOptions, ports: Ports, dynamicFile: string): string {
  const f = 'traefik/traefik.yml';
  let s = read(f, opts);
  s = substitute(s, 'address: ":443"', `address: "127.0.0.1:${ports.https}"`, f);
  s = substitute(s, 'address: ":80"', `address: "127.0.0.1:${ports.http}"`, f);
  s = substitute(s, /filename: \/etc\/traefik\/dynamic\/hse\.yml/g, `filename: ${dynamicFile}`, f);
  // The resolver block runs from its key to the next top-level key; the test certificate replaces it.
  s = substitute(s, /^certificatesResolvers:\n(?:[ #].*\n|\n)*?(?=^\S)/gm, '', f);
  return `${s}\nglobal:\n  checkNewVersion: false\n  sendAnonymousUsage: false\nlog:\n  level: INFO\n  noColor: true\n`;
}

/** Dynamic configuration: the example's, with the test certificate instead of the ACME resolver. */
export function traefikDynamic(opts: ProxyOptions): string {
  const f = 'traefik/hse.yml';
  if ('socket' in opts.upstream && !opts.instances) throw new Error('Traefik cannot proxy to a Unix socket (advanced/proxy.md, "Shared host")');
  let s = read(f, opts);
  s = substitute(s, EXAMPLE_DOMAIN, opts.domain, f);
  if (!opts.instances && !('socket' in opts.upstream)) s = substitute(s, 'http://127.0.0.1:8080', `http://${opts.upstream.host}:${opts.upstream.port}`, f);
  s = substitute(s, /tls:\n\s+certResolver: letsencrypt/g, 'tls: {}', f);
  // Without SNI (an IP literal) Traefik answers with the store's default certificate.
  return [
    s,
    'tls:',
    '  certificates:',
    `    - certFile: ${opts.ca.certFile}`,
    `      keyFile: ${opts.ca.keyFile}`,
    '  stores:',
    '    default:',
    '      defaultCertificate:',
    `        certFile: ${opts.ca.certFile}`,
    `        keyFile: ${opts.ca.keyFile}`,
    '',
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------------------------
// Nginx Proxy Manager

export function npmProxyHost(opts: ProxyOptions): NpmProxyHost {
  if ('socket' in opts.upstream) throw new Error('Nginx Proxy Manager forwards to a host and port only');
  if (opts.instances) throw new Error('Nginx Proxy Manager has no example for several instances (advanced/ha.md)');
  const host = JSON.parse(read('npm/proxy-host.json')) as NpmProxyHost;
  if (!host.domain_names.includes(EXAMPLE_DOMAIN) || host.forward_port !== 8080) {
    throw new Error('npm/proxy-host.json: expected domain vpn.example.com and forward port 8080; update test/harness/proxies.ts with the example');
  }
  return {
    ...host,
    domain_names: [opts.domain],
    forward_host: opts.upstream.host,
    forward_port: opts.upstream.port,
    advanced_config: (opts.npmAdvanced ?? ((x: string) => x))(read('npm/advanced.conf', opts)),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Running them

/** Waits until something accepts TCP connections on 127.0.0.1:port, failing early if the process exits. */
async function waitListening(s: Proc, port: number, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (s.proc.exitCode !== null || s.proc.signalCode !== null) break;
    const ok = await new Promise<boolean>((resolve) => {
      const c = net.connect(port, '127.0.0.1');
      c.once('connect', () => {
        c.destroy();
        resolve(true);
      });
      c.once('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(100);
  }
  throw new Error(`${what} did not listen on 127.0.0.1:${port}; output:\n${s.output()}`);
}

/**
 * Listening is not serving: Traefik opens its entrypoint before its file provider has loaded the router and the
 * certificate, and meanwhile answers with its own default certificate or its own 404. Waits until a request through
 * the proxy completes a handshake with the test CA's certificate and is not answered by Traefik itself.
 */
async function waitServing(s: Proc, port: number, kind: ProxyKind, hostHeader: string, ca: TestCA, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  let last = '';
  while (Date.now() < deadline) {
    if (s.proc.exitCode !== null || s.proc.signalCode !== null) break;
    last = await new Promise<string>((resolve) => {
      const req = https.get({ host: '127.0.0.1', port, path: '/', ca: ca.caPem, agent: false, headers: { host: hostHeader } }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve(kind === 'traefik' && res.statusCode === 404 && body === '404 page not found\n' ? "Traefik's own 404" : ''));
        res.on('error', (e) => resolve(e.message));
      });
      req.setTimeout(5000, () => req.destroy(new Error('no answer in 5 s')));
      req.on('error', (e) => resolve(e.message));
    });
    if (last === '') return;
    await sleep(100);
  }
  throw new Error(`${kind} listened on 127.0.0.1:${port} but did not serve the example's site (${last}); output:\n${s.output()}`);
}

function checkConfig(cmd: string, args: string[], env: Record<string, string>, cwd: string, what: string): void {
  const r = spawnSync(cmd, args, { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${what} refused its configuration:\n${r.stdout}${r.stderr}`);
}

export interface PreparedProxy {
  dir: string;
  ports: Ports;
  files: Record<string, string>;
  cmd: string;
  args: string[];
  env: Record<string, string>;
}

/** Writes the configuration for `kind` into a fresh directory (validated by the proxy itself) without starting it. */
export async function prepareProxy(kind: ProxyKind, opts: ProxyOptions): Promise<PreparedProxy> {
  const missing = missingProxy(kind);
  if (missing) throw new Error(missing);
  const bin = findBinary(BINARY[kind])!;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hse-proxy-${kind}-`));
  try {
    return await writeConfig(kind, opts, bin, dir);
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

async function writeConfig(kind: ProxyKind, opts: ProxyOptions, bin: string, dir: string): Promise<PreparedProxy> {
  const ports = opts.ports ?? { https: await freePort(), http: await freePort() };
  const files: Record<string, string> = {};
  const env: Record<string, string> = { HOME: dir, XDG_DATA_HOME: path.join(dir, 'data'), XDG_CONFIG_HOME: path.join(dir, 'config') };
  let args: string[];
  if (kind === 'nginx' || kind === 'npm') {
    const http =
      kind === 'nginx'
        ? nginxSite(opts, ports)
        : renderNpmProxyHost(npmProxyHost(opts), {
            ports,
            certFile: opts.ca.certFile,
            keyFile: opts.ca.keyFile,
            logDir: dir,
            extraRealIpFrom: opts.npmExtraRealIpFrom ?? [],
          });
    files['nginx.conf'] = path.join(dir, 'nginx.conf');
    fs.writeFileSync(files['nginx.conf'], nginxMain(dir, http));
    checkConfig(bin, ['-t', '-q', '-e', 'stderr', '-p', dir, '-c', files['nginx.conf']], env, dir, `${kind} (nginx -t)`);
    args = ['-e', 'stderr', '-p', dir, '-c', files['nginx.conf']];
  } else if (kind === 'caddy') {
    files.Caddyfile = path.join(dir, 'Caddyfile');
    fs.writeFileSync(files.Caddyfile, caddyfile(opts, ports, dir));
    checkConfig(bin, ['validate', '--config', files.Caddyfile, '--adapter', 'caddyfile'], env, dir, 'caddy validate');
    args = ['run', '--config', files.Caddyfile, '--adapter', 'caddyfile'];
  } else {
    files['hse.yml'] = path.join(dir, 'hse.yml');
    files['traefik.yml'] = path.join(dir, 'traefik.yml');
    fs.writeFileSync(files['hse.yml'], traefikDynamic(opts));
    fs.writeFileSync(files['traefik.yml'], traefikStatic(opts, ports, files['hse.yml']));
    args = [`--configFile=${files['traefik.yml']}`];
  }
  return { dir, ports, files, cmd: bin, args, env };
}

/** Starts `kind` in front of `opts.upstream` and resolves once it serves the example's site. */
export async function startProxy(kind: ProxyKind, opts: ProxyOptions): Promise<RunningProxy> {
  // A free port found by binding and releasing it can be taken by a parallel test before the proxy binds it: try
  // again with fresh ports (only when the caller did not fix them).
  for (let attempt = 1; ; attempt++) {
    try {
      return await startProxyOnce(kind, opts);
    } catch (e) {
      if (opts.ports || attempt >= 3 || !/address already in use/i.test((e as Error).message)) throw e;
    }
  }
}

async function startProxyOnce(kind: ProxyKind, opts: ProxyOptions): Promise<RunningProxy> {
  const p = await prepareProxy(kind, opts);
  const s = startProcess(kind, p.cmd, p.args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...p.env }, cwd: p.dir, keep: HEAD_AND_TAIL });
  const stop = async () => {
    // nginx: SIGQUIT is the graceful stop; SIGTERM is the fast one, which is what a test wants.
    await s.stop('SIGTERM', 5000);
    fs.rmSync(p.dir, { recursive: true, force: true });
  };
  const host = opts.domain.includes(':') ? `[${opts.domain}]` : opts.domain;
  try {
    await waitListening(s, p.ports.https, kind);
    await waitServing(s, p.ports.https, kind, `${host}:${p.ports.https}`, opts.ca);
  } catch (e) {
    await stop();
    throw e;
  }
  return { kind, url: `https://${host}:${p.ports.https}`, port: p.ports.https, httpPort: p.ports.http, dir: p.dir, files: p.files, output: s.output, stop };
}
