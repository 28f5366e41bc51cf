// The proxy-mode checks behind Debian's nginx, started from advanced/proxy/ (see behind-proxy.ts).
import { behindProxy } from './behind-proxy.ts';

behindProxy('nginx');
