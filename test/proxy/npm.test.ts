// The proxy-mode checks behind Nginx Proxy Manager, reproduced as Debian's nginx from its proxy-host template with the fields and Advanced block in advanced/proxy/npm/ (see behind-proxy.ts).
import { behindProxy } from './behind-proxy.ts';

behindProxy('npm');
