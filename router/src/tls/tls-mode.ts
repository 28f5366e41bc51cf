// TLS mode wired together (HSE_PUBLIC_URL https:// and HSE_TLS on): the HTTPS listener on HSE_HTTPS_PORT
// (tls-server.ts), plain HTTP on HSE_TLS_HTTP_PORT (http-redirect.ts), and one certificate source: the operator's
// files when HSE_TLS_CERT_FILE/HSE_TLS_KEY_FILE are set (cert-files.ts), ACME otherwise (acme.ts).
//
// Both ports listen before any certificate exists: port 80 must already answer the CA's challenge for the first
// certificate, and an operator fixing a problem keeps a working port 80 to test against.
import type http from 'node:http';
import * as nodeHttp from '../../../shared/node-http.ts';
import type { Config } from '../../../shared/config.ts';
import type { Logger } from '../../../shared/log.ts';
import { listen } from '../listen.ts';
import type { Router } from '../router.ts';
import { routerServerOptions } from '../server-options.ts';
import { startAcme } from './acme.ts';
import { AcmeStore } from './acme-store.ts';
import { watchCertificateFiles } from './cert-files.ts';
import { ChallengeStore } from './challenges.ts';
import { plainHttpHandler } from './http-redirect.ts';
import { createTlsServer } from './tls-server.ts';

export interface TlsMode {
  /** Stops certificate work, then drains both listeners and the router's tunnels; true if nothing had to be cut. */
  drain(deadlineMs: number): Promise<boolean>;
}

export async function startTlsMode(cfg: Config, log: Logger, router: Router, fields: Record<string, unknown>): Promise<TlsMode> {
  const challenges = new ChallengeStore();
  const tls = createTlsServer(cfg, log, router);

  // /generate_204 on port 80 goes through the router's own pipeline (client address, header rules, drain) by way of
  // a server that never listens: the router serves whatever request is emitted on it.
  const viaRouter = nodeHttp.createServer();
  router.attach(viaRouter);
  // Upgrades on port 80 are answered like any request (redirected), not tunnelled.
  const plainOptions: http.ServerOptions = { ...routerServerOptions(cfg), shouldUpgradeCallback: () => false };
  const plain = nodeHttp.createServer(
    plainOptions,
    plainHttpHandler({
      cfg,
      challenges,
      toRouter: (req, res) => viaRouter.emit('request', req, res),
      httpsReady: () => tls.current() !== null,
    }),
  );

  const host = cfg.publicUrl.hostname;
  const source = cfg.tlsCertFile !== null ? 'files' : 'acme';
  await listen(plain, { port: cfg.tlsHttpPort, address: cfg.listenAddress, scheme: 'http' }, log, {
    role: 'redirects to https, ACME challenges, /generate_204',
  });
  await listen(tls.server, { port: cfg.httpsPort, address: cfg.listenAddress, scheme: 'https' }, log, {
    ...fields,
    certificates: source === 'files' ? `${cfg.tlsCertFile} + ${cfg.tlsKeyFile}` : `ACME ${cfg.acmeDirectoryUrl}`,
    http2: 'offered (ALPN h2, http/1.1)',
  });

  let stopCertificates: () => void;
  if (cfg.tlsCertFile !== null && cfg.tlsKeyFile !== null) {
    const files = watchCertificateFiles({
      certFile: cfg.tlsCertFile,
      keyFile: cfg.tlsKeyFile,
      host,
      log,
      onCertificate: (c) => tls.install(c, 'files'),
      onProblem: (reason) => tls.setProblem(reason),
    });
    files.reload();
    stopCertificates = () => files.stop();
  } else {
    tls.setProblem('waiting for the first ACME certificate');
    const acme = startAcme({
      cfg,
      log,
      store: new AcmeStore(cfg.dataDir),
      challenges,
      onCertificate: (c, how) => tls.install(c, how),
      onProblem: (reason) => tls.setProblem(reason),
    });
    stopCertificates = () => acme.stop();
  }

  return {
    async drain(deadlineMs) {
      stopCertificates();
      plain.close();
      plain.closeIdleConnections();
      const [routed, h2] = await Promise.all([router.drain(deadlineMs), tls.drain(deadlineMs)]);
      plain.closeAllConnections();
      return routed && h2;
    },
  };
}
