// The proxy-mode checks behind Traefik v3 (pinned, .ci/install-proxies.sh), started from advanced/proxy/ (see behind-proxy.ts).
import { behindProxy } from './behind-proxy.ts';

behindProxy('traefik');
