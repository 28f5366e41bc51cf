// The written promises of the examples and deploy files, checked as text (how they behave is checked with the real
// proxies in the other files here): every example is one host, one upstream, no per-path split, and carries each
// setting the issue asks for; the NPM field list and its JSON agree; .env.example explains every setting the code
// reads; the Dockerfile runs the steps the tests run.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { ROOT } from '../harness/process.ts';
import { EXAMPLES } from '../harness/proxies.ts';
import { advancedHasRootLocation, type NpmProxyHost } from './npm-template.ts';

const read = (rel: string) => fs.readFileSync(path.join(EXAMPLES, rel), 'utf8');
/** Lines without comments, so a requirement met only in a comment does not count. */
const code = (text: string, comment = '#') =>
  text
    .split('\n')
    .filter((l) => !l.trim().startsWith(comment))
    .join('\n');
const count = (text: string, re: RegExp) => [...text.matchAll(new RegExp(re.source, re.flags.includes('g') ? re.flags : `${re.flags}g`))].length;

test('nginx: map before the servers, one upstream, one location, every required directive', (t) => {
  const s = code(read('nginx/hse.conf'));
  const map = s.indexOf('map $http_upgrade $connection_upgrade {');
  t.true(map >= 0 && map < s.indexOf('server {'), 'the Upgrade -> Connection map comes before the server blocks');
  t.regex(s, /default upgrade;\s*\n\s*''\s+close;/);
  t.is(count(s, /^\s*upstream /m), 1);
  t.is(count(s, /^\s*server 127\.0\.0\.1:8080;/m), 1);
  t.is(count(s, /^\s*location /m), 1);
  for (const d of [
    /proxy_pass http:\/\/hse;/,
    /proxy_http_version 1\.1;/,
    /proxy_set_header Upgrade\s+\$http_upgrade;/,
    /proxy_set_header Connection\s+\$connection_upgrade;/,
    /proxy_set_header Host\s+\$host;/,
    /proxy_set_header X-Forwarded-For\s+\$proxy_add_x_forwarded_for;/,
    /proxy_set_header X-Forwarded-Proto\s+\$scheme;/,
    /proxy_buffering\s+off;/,
    /proxy_request_buffering\s+off;/,
    /proxy_read_timeout 3600s;/,
    /client_max_body_size 0;/,
  ]) {
    t.regex(s, d);
  }
});

test('Caddy: one site block, one reverse_proxy, HTTP/1.1, flushing, no header_up X-Forwarded-For', (t) => {
  const s = code(read('caddy/Caddyfile'));
  t.is(count(s, /^\S.*\{$/m), 1, 'one site block');
  t.is(count(s, /reverse_proxy /), 1);
  t.regex(s, /reverse_proxy 127\.0\.0\.1:8080 \{/);
  t.regex(s, /flush_interval -1/);
  t.regex(s, /transport http \{[^}]*versions 1\.1/);
  t.regex(s, /read_timeout 3600s/);
  t.notRegex(s, /header_up/);
});

test('Traefik: one router, one service with one server, the readTimeout in the static file', (t) => {
  const d = code(read('traefik/hse.yml'));
  t.is(count(d, /^ {4}\S+:$/m), 2, 'one router and one service');
  t.is(count(d, /- url: /), 1);
  t.regex(d, /rule: Host\(`vpn\.example\.com`\)/);
  t.regex(d, /- url: http:\/\/127\.0\.0\.1:8080/);
  t.regex(d, /passHostHeader: true/);
  t.regex(d, /flushInterval: "-1"/);
  t.notRegex(d, /PathPrefix|Path\(/);
  t.regex(code(read('traefik/traefik.yml')), /websecure:[\s\S]*respondingTimeouts:\s*\n\s*readTimeout: 3600s/);
});

test('NPM: the field list matches proxy-host.json, Websockets Support on, the Advanced block brings the one location', (t) => {
  const json = JSON.parse(read('npm/proxy-host.json')) as NpmProxyHost;
  const readme = read('npm/README.md');
  const field = (name: string) => {
    const m = new RegExp(`^\\| ${name.replace(/[/]/g, '\\/')} \\| (.*) \\|$`, 'm').exec(readme);
    if (!m) throw new Error(`npm/README.md has no row for ${name}`);
    return m[1].replace(/`/g, '');
  };
  const onOff = (b: boolean) => (b ? 'on' : 'off');
  t.is(field('Domain Names'), json.domain_names.join(', '));
  t.is(field('Scheme'), json.forward_scheme);
  t.is(field('Forward Hostname / IP'), json.forward_host);
  t.is(field('Forward Port'), String(json.forward_port));
  t.is(field('Cache Assets'), onOff(json.caching_enabled));
  t.is(field('Block Common Exploits'), onOff(json.block_exploits));
  t.is(field('Websockets Support'), 'on');
  t.true(json.allow_websocket_upgrade);
  t.is(field('Force SSL'), onOff(json.ssl_forced));
  t.is(field('HTTP/2 Support'), onOff(json.http2_support));
  t.is(field('HSTS Enabled'), onOff(json.hsts_enabled));
  t.deepEqual(json.locations, []);
  const adv = read('npm/advanced.conf');
  t.true(advancedHasRootLocation(adv), 'NPM must see its own "location /" rule match, or it adds a second one');
  const a = code(adv);
  t.is(count(a, /^\s*location /m), 1);
  for (const d of [
    /proxy_http_version 1\.1;/,
    /proxy_set_header Upgrade\s+\$http_upgrade;/,
    /proxy_set_header Connection\s+\$http_connection;/,
    /proxy_set_header X-Forwarded-For\s+\$proxy_add_x_forwarded_for;/,
    /proxy_buffering\s+off;/,
    /proxy_request_buffering\s+off;/,
    /proxy_read_timeout 3600s;/,
    /client_max_body_size 0;/,
  ]) {
    t.regex(a, d);
  }
});

test('deploy/.env.example explains every HSE_ setting shared/config.ts reads', (t) => {
  const config = fs.readFileSync(path.join(ROOT, 'shared/config.ts'), 'utf8');
  const settings = new Set([...config.matchAll(/'(HSE_[A-Z0-9_]+)'/g)].map((m) => m[1]));
  t.true(settings.size > 20, 'found the settings');
  const example = fs.readFileSync(path.join(ROOT, 'deploy/.env.example'), 'utf8');
  const missing = [...settings].filter((s) => !new RegExp(`^#?${s}=`, 'm').test(example));
  t.deepEqual(missing, [], 'add these to deploy/.env.example with a line saying what they do');
});

test('advanced/proxy.md describes every proxy-mode variable', (t) => {
  const doc = fs.readFileSync(path.join(ROOT, 'advanced/proxy.md'), 'utf8');
  for (const v of ['HSE_PUBLIC_URL', 'HSE_TLS', 'HSE_TRUSTED_PROXIES', 'HSE_TRUSTED_PROXIES_ANY', 'HSE_HTTP_PORT', 'HSE_PROXY_BIND', 'HSE_DERP_MODE']) {
    t.regex(doc, new RegExp(`^\\| \`${v}\` \\|`, 'm'), v);
  }
  t.regex(doc, /docker network inspect hse_default/);
});

test('the Dockerfile runs the image steps the tests run, as a non-root user, with the volume and a healthcheck', (t) => {
  const d = code(fs.readFileSync(path.join(ROOT, 'deploy/Dockerfile'), 'utf8'));
  t.regex(d, /^FROM node:24-[a-z]+-slim$/m);
  for (const phase of ['system', 'deps', 'verify', 'cache']) t.regex(d, new RegExp(`^RUN deploy/image-setup\\.sh ${phase}$`, 'm'));
  t.regex(d, /HSE_DATA_DIR=\/data/);
  t.regex(d, /HSE_LISTEN_ADDRESS=0\.0\.0\.0/);
  t.regex(d, /^VOLUME \/data$/m);
  t.regex(d, /^EXPOSE 80 443 8080 3478\/udp$/m);
  t.regex(d, /^USER hse$/m);
  t.regex(d, /^HEALTHCHECK .*CMD \["\/app\/deploy\/healthcheck\.sh"\]$/m);
  t.regex(d, /^ENTRYPOINT \["\/usr\/bin\/tini", "--", "\/app\/deploy\/entrypoint\.sh"\]$/m);
  // The entrypoint hands over to the supervisor script, which runs pm2-runtime on ecosystem.config.js.
  t.regex(fs.readFileSync(path.join(ROOT, 'deploy/entrypoint.sh'), 'utf8'), /^exec \/bin\/sh "\$app\/deploy\/supervisor\.sh"$/m);
  t.regex(fs.readFileSync(path.join(ROOT, 'deploy/supervisor.sh'), 'utf8'), /pm2-runtime" start "\$app\/ecosystem\.config\.js"/);
});
