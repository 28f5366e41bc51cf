// Nginx Proxy Manager, reproduced as plain nginx: what NPM's backend writes for one Proxy Host, from the same
// fields its UI and API take, so the example's fields and Advanced block can be tested with Debian's nginx instead of
// NPM's container. Written from NPM's published behaviour (its nginx.conf, backend/templates/proxy_host.conf and the
// includes it pulls in, and the rule in backend/internal/nginx.js that drops the generated `location /` when the
// Advanced block has one); the NPM image itself is not used.
//
// What is reproduced, in the order NPM's file has it:
//   http level (NPM's nginx.conf): HTTP/1.1 upstream, 90 s proxy timeouts, 2000m body cap, X-Forwarded-For appended,
//     Accept-Encoding cleared, the $forward_scheme / $x_forwarded_* maps, and the real-IP rule that believes
//     X-Real-IP from 10/8, 172.16/12 and 192.168/16;
//   server: $forward_scheme/$server/$port from the Details tab, listeners on 80 and 443 ssl, the certificate, the
//     "Force SSL" redirect, the Websockets Support lines, the Advanced block, and — only when the Advanced block has
//     no `location /` — NPM's default location with its proxy.conf headers.
// Not reproduced (the example keeps them off, and rendering refuses them): Cache Assets, Block Common Exploits,
// access lists, custom locations, HSTS. NPM's `http2 on|off` line is left out: Debian's nginx 1.22 predates that
// directive, and off is its default.

export interface NpmProxyHost {
  domain_names: string[];
  forward_scheme: 'http' | 'https';
  forward_host: string;
  forward_port: number;
  access_list_id: number;
  certificate_id: number | string;
  ssl_forced: boolean;
  http2_support: boolean;
  hsts_enabled: boolean;
  hsts_subdomains: boolean;
  caching_enabled: boolean;
  block_exploits: boolean;
  allow_websocket_upgrade: boolean;
  locations: unknown[];
  advanced_config: string;
}

export interface NpmRenderOptions {
  ports: { http: number; https: number };
  certFile: string;
  keyFile: string;
  logDir: string;
  /** Extra trusted ranges for NPM's real-IP rule, standing in for a client network NPM believes (LAN, Docker). */
  extraRealIpFrom: string[];
}

/** NPM's test for "the Advanced block brings its own `location /`" (then the generated one is left out). */
export function advancedHasRootLocation(advanced: string): boolean {
  return /^(?:.*;)?\s*?location\s*?\/\s*?{/im.test(advanced);
}

/** The http-context nginx configuration NPM would run for this one Proxy Host. */
export function renderNpmProxyHost(h: NpmProxyHost, o: NpmRenderOptions): string {
  const unsupported = (['caching_enabled', 'block_exploits', 'hsts_enabled'] as const).filter((k) => h[k]);
  if (unsupported.length > 0 || h.access_list_id !== 0 || h.locations.length > 0) {
    throw new Error(
      `the NPM reproduction does not cover ${[...unsupported, 'access lists', 'custom locations'].join(', ')}; keep them off in advanced/proxy/npm/proxy-host.json`,
    );
  }
  const websocket = h.allow_websocket_upgrade
    ? ['proxy_set_header Upgrade $http_upgrade;', 'proxy_set_header Connection $http_connection;', 'proxy_http_version 1.1;']
    : [];
  const lines: string[] = [
    // --- NPM's nginx.conf, http block (the parts that shape proxying) ---
    'server_tokens off;',
    'gzip on;',
    'keepalive_timeout 90s;',
    'proxy_connect_timeout 90s;',
    'proxy_send_timeout 90s;',
    'proxy_read_timeout 90s;',
    'proxy_ignore_client_abort off;',
    'client_max_body_size 2000m;',
    'server_names_hash_bucket_size 1024;',
    'proxy_http_version 1.1;',
    'proxy_set_header X-Forwarded-Scheme $scheme;',
    'proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
    'proxy_set_header Accept-Encoding "";',
    'proxy_cache off;',
    'map $host $forward_scheme { default http; }',
    'map $http_x_forwarded_proto $x_forwarded_proto { "http" "http"; "https" "https"; default $scheme; }',
    'map $http_x_forwarded_scheme $x_forwarded_scheme { "http" "http"; "https" "https"; default $scheme; }',
    ...['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', ...o.extraRealIpFrom].map((r) => `set_real_ip_from ${r};`),
    'real_ip_header X-Real-IP;',
    'real_ip_recursive on;',
    '',
    // --- the generated proxy host file ---
    `# ${h.domain_names.join(', ')}`,
    'server {',
    `  set $forward_scheme ${h.forward_scheme};`,
    `  set $server "${h.forward_host}";`,
    `  set $port ${h.forward_port};`,
    '',
    `  listen 127.0.0.1:${o.ports.http};`,
    `  listen 127.0.0.1:${o.ports.https} ssl;`,
    `  server_name ${h.domain_names.join(' ')};`,
    '',
    // "Custom SSL" certificate (NPM's Let's Encrypt variant differs only in paths and the ACME challenge location).
    '  ssl_session_timeout 5m;',
    '  ssl_session_cache shared:SSL:50m;',
    '  ssl_protocols TLSv1.2 TLSv1.3;',
    `  ssl_certificate ${o.certFile};`,
    `  ssl_certificate_key ${o.keyFile};`,
    '',
  ];
  if (h.ssl_forced) {
    // Force SSL: plain http is redirected unless it is NPM's own ACME test request. (NPM can also trust an upstream
    // X-Forwarded-Proto here; that option is off by default and not used.)
    lines.push(
      '  set $test "";',
      '  if ($scheme = "http") { set $test "H"; }',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: nginx's own ${var} syntax, reproduced from NPM's template
      '  if ($request_uri = /.well-known/acme-challenge/test-challenge) { set $test "${test}T"; }',
      '  if ($test = H) { return 301 https://$host$request_uri; }',
      '',
    );
  }
  lines.push(...websocket.map((l) => `  ${l}`), '');
  lines.push(`  access_log ${o.logDir}/proxy-host_access.log;`, `  error_log ${o.logDir}/proxy-host_error.log warn;`, '');
  lines.push(h.advanced_config, '');
  if (!advancedHasRootLocation(h.advanced_config)) {
    lines.push(
      '  location / {',
      ...websocket.map((l) => `    ${l}`),
      // NPM's include/proxy.conf
      '    add_header X-Served-By $host;',
      '    proxy_set_header Host $host;',
      '    proxy_set_header X-Forwarded-Scheme $x_forwarded_scheme;',
      '    proxy_set_header X-Forwarded-Proto $x_forwarded_proto;',
      '    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
      '    proxy_set_header X-Real-IP $remote_addr;',
      '    proxy_pass $forward_scheme://$server:$port$request_uri;',
      '  }',
    );
  }
  lines.push('}', '');
  return lines.join('\n');
}
