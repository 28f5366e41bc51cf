// The proxy-mode checks behind Nginx Proxy Manager, reproduced as Debian's nginx from its proxy-host template with the fields and Advanced block in advanced/proxy/npm/ (see behind-proxy.ts).
// NPM users run containers, so here the image runs as the container runs it: under pm2 with its embedded Redis.
import { behindProxy } from './behind-proxy.ts';

behindProxy('npm', { supervised: true });
