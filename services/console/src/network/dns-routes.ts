// The tailnet's DNS settings.
//   GET  /console/dns     the settings in force (everyone), the form to change them (administrators)
//   POST /console/dns     the form (dns-form.ts)  -> 303 to the page | 400 page with the reason; the old settings stay
// The coordination service checks the settings, logs the change with the console account and sends it to every
// connected device.
import { type ConsoleContext, type ConsoleRouter, viewerOf } from '../request/context.ts';
import { takeFlash } from '../request/flash.ts';
import { formRoute } from '../request/form-route.ts';
import { dnsPage, type DnsView } from '../views/dns-page.ts';
import { actorOf } from './actor.ts';
import type { NetworkDeps } from './deps.ts';
import { formToSettings, readDnsForm } from './dns-form.ts';

export function dnsRoutes(router: ConsoleRouter, d: NetworkDeps): void {
  const show = async (ctx: ConsoleContext, extra: Partial<DnsView> = {}): Promise<string> => {
    const settings = await d.admin.getDns(actorOf(ctx));
    return dnsPage({
      viewer: viewerOf(ctx),
      settings,
      baseDomain: d.cfg.baseDomain,
      flash: extra.error ? null : takeFlash(ctx),
      ...extra,
    });
  };

  router.get('/console/dns', d.gate, async (ctx) => {
    ctx.type = 'html';
    ctx.body = await show(ctx);
  });

  formRoute(router, '/console/dns', d, {
    role: 'admin',
    run: async (ctx, form) => {
      await d.admin.setDns(actorOf(ctx), formToSettings(readDnsForm(form)));
      return { text: 'DNS settings saved. Connected devices have them within a second.', to: '/console/dns' };
    },
    refused: (ctx, message, form) => show(ctx, { error: message, draft: readDnsForm(form) }),
  });
}
